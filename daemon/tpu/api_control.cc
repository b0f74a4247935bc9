#include "daemon/tpu/api_control.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {


}  // namespace

ApiTpuControl::ApiTpuControl(TpuConfig config, std::shared_ptr<HttpClient> http,
                             std::shared_ptr<const MetadataClient> metadata, std::shared_ptr<WaitClock> clock)
    : CloudTpuControl(config, metadata, clock),
      api_(TpuApiOptionsFor(config), std::move(http), std::make_shared<AccessTokenSource>(metadata, clock), clock) {
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
  call.Report(absl::StrCat(NodeVerbName(verb), " requested (operation ", OperationShortName(op->name), ")"));
  return AwaitOperation(*std::move(op), verb, deadline, call);
}

absl::Status ApiTpuControl::AwaitOperation(TpuOperation op, NodeVerb verb, const Deadline& deadline,
                                           const TpuCall& call) {
  return AwaitTpuOperation(api_, std::move(op), NodeVerbName(verb), poll_interval(), deadline, call);
}

}  // namespace tpud
