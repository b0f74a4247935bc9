#include "daemon/tpu/api_control.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

TpuApiOptions ApiOptions(const TpuConfig& config) {
  TpuApiOptions options;
  options.endpoint = config.api_endpoint;
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  options.request_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(Seconds(config.request_timeout_seconds));
  options.max_attempts = config.max_attempts;
  options.retry_initial = Seconds(config.retry_initial_seconds);
  options.retry_max = Seconds(config.retry_max_seconds);
  return options;
}

// "operation-123" of "projects/p/locations/z/operations/operation-123".
std::string ShortName(const std::string& name) { return name.substr(name.rfind('/') + 1); }

}  // namespace

ApiTpuControl::ApiTpuControl(TpuConfig config, std::shared_ptr<HttpClient> http,
                             std::shared_ptr<const MetadataClient> metadata, std::shared_ptr<WaitClock> clock)
    : CloudTpuControl(config, metadata, clock),
      api_(ApiOptions(config), std::move(http), std::make_shared<AccessTokenSource>(metadata, clock), clock) {
}

absl::StatusOr<TpuNode> ApiTpuControl::GetNode(const TpuTarget& target, const Deadline& deadline,
                                               CancelToken* cancel) {
  return api_.GetNode(target, deadline, cancel);
}

absl::Status ApiTpuControl::RunVerb(const TpuTarget& target, NodeVerb verb, const Deadline& deadline,
                                    const TpuCall& call) {
  absl::StatusOr<TpuOperation> op = api_.PostVerb(target, verb, deadline, call.cancel);
  if (!op.ok()) return op.status();
  if (op->name.empty() && !op->done) {
    return absl::UnknownError(absl::StrCat(NodeVerbName(verb), " ", target.ResourceName(),
                                           ": the API returned an operation without a name"));
  }
  call.Report(absl::StrCat(NodeVerbName(verb), " requested (operation ", ShortName(op->name), ")"));
  return AwaitOperation(*std::move(op), verb, deadline, call);
}

absl::Status ApiTpuControl::AwaitOperation(TpuOperation op, NodeVerb verb, const Deadline& deadline,
                                           const TpuCall& call) {
  const std::string what = absl::StrCat(NodeVerbName(verb), " operation ", op.name);
  auto not_done = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " not done after ", FormatSeconds(deadline.Elapsed()),
                     op.status_detail.empty() ? "" : " (status: " + op.status_detail + ")"));
  };
  while (!op.done) {
    if (deadline.Expired()) return not_done();
    if (absl::Status s = deadline.SleepAtMost(poll_interval(), call.cancel); !s.ok()) return s;
    absl::StatusOr<TpuOperation> polled = api_.GetOperation(op.name, deadline, call.cancel);
    if (!polled.ok()) {
      const bool out_of_time =
          polled.status().code() == absl::StatusCode::kDeadlineExceeded && deadline.Expired();
      return out_of_time ? not_done() : polled.status();
    }
    op = *std::move(polled);
  }
  if (!op.error.ok()) {
    call.Report(absl::StrCat("operation ", ShortName(op.name), " failed: ", std::string(op.error.message())));
    return absl::Status(op.error.code(), absl::StrCat(what, " failed: ", std::string(op.error.message())));
  }
  call.Report(absl::StrCat("operation ", ShortName(op.name), " done"));
  return absl::OkStatus();
}

}  // namespace tpud
