#include "daemon/tpu/slice_reset.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/tpu/access_token.h"
#include "daemon/tpu/tpu_control.h"
#include "spdlog/spdlog.h"

namespace tpud {

QueuedResourceReset::QueuedResourceReset(TpuConfig config, std::shared_ptr<HttpClient> http,
                                         std::shared_ptr<const MetadataClient> metadata,
                                         std::shared_ptr<WaitClock> clock)
    : config_(std::move(config)),
      metadata_(metadata),
      clock_(clock),
      api_(TpuApiOptionsFor(config_), std::move(http), std::make_shared<AccessTokenSource>(metadata, clock), clock) {}

absl::StatusOr<std::string> QueuedResourceReset::ResourceName(CancelToken* cancel) {
  if (absl::StartsWith(config_.queued_resource, "projects/")) return config_.queued_resource;
  TpuConfig named = config_;
  named.name = config_.queued_resource;  // Resolves project and zone as for a node.
  absl::StatusOr<TpuTarget> target = ResolveTpuTarget(named, *metadata_, cancel);
  if (!target.ok()) return target.status();
  return absl::StrCat("projects/", target->project, "/locations/", target->zone, "/queuedResources/",
                      config_.queued_resource);
}

absl::Status QueuedResourceReset::Reset(CancelToken* cancel) {
  const Deadline deadline(*clock_, Seconds(config_.timeout_seconds));
  absl::StatusOr<std::string> name = ResourceName(cancel);
  if (!name.ok()) return name.status();
  TpuCall call;
  call.cancel = cancel;
  call.progress = [&name](const std::string& line) { spdlog::info("queued resource {}: {}", *name, line); };
  absl::StatusOr<TpuOperation> op = api_.ResetQueuedResource(*name, deadline, cancel);
  if (!op.ok()) return op.status();
  call.Report(absl::StrCat("reset requested (operation ", OperationShortName(op->name), ")"));
  const auto poll = Deadline::ToDuration(Seconds(config_.poll_interval_seconds));
  if (absl::Status s = AwaitTpuOperation(api_, *std::move(op), "reset", poll, deadline, call); !s.ok()) return s;
  for (;;) {
    absl::StatusOr<std::string> state = api_.GetQueuedResourceState(*name, deadline, cancel);
    if (!state.ok()) return state.status();
    if (*state == "ACTIVE") return absl::OkStatus();
    if (deadline.Expired()) {
      return absl::DeadlineExceededError(absl::StrCat("queued resource ", *name, " is ", *state, " after ",
                                                      FormatSeconds(deadline.Elapsed()), ", not ACTIVE"));
    }
    if (absl::Status s = deadline.SleepAtMost(poll, cancel); !s.ok()) return s;
  }
}

std::function<absl::Status(CancelToken*)> MakeSliceReset(const TpuConfig& config) {
  if (config.queued_resource.empty()) return nullptr;
  auto metadata = std::make_shared<MetadataClient>(MetadataBaseUrl(config.metadata_host));
  auto reset = std::make_shared<QueuedResourceReset>(config, NewCurlHttpClient(), metadata, SystemWaitClock());
  return [reset](CancelToken* cancel) { return reset->Reset(cancel); };
}

}  // namespace tpud
