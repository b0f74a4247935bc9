// The "api" backend: resets a node through the Cloud TPU v2 REST API
// (tpu_api_client.h), authenticated with the metadata server's token.
//
// Reset: GET the node; POST :stop (unless STOPPING/STOPPED/PREEMPTED) and poll
// operations.get every poll_interval_seconds until done; POST :start likewise;
// then poll nodes.get until state READY and health HEALTHY. An operation that
// ends with error{code,message} fails the reset with that code and message.
#pragma once

#include <memory>

#include "daemon/tpu/cloud_control.h"
#include "daemon/tpu/tpu_api_client.h"

namespace tpud {

// Thread-safety: as TpuControl.
class ApiTpuControl final : public CloudTpuControl {
 public:
  // `metadata` supplies the token and, when the config leaves them empty, the
  // project and zone. `http` is the API's transport (libcurl in production).
  ApiTpuControl(TpuConfig config, std::shared_ptr<HttpClient> http,
                std::shared_ptr<const MetadataClient> metadata, std::shared_ptr<WaitClock> clock);

  std::string name() const override { return "api"; }

 protected:
  absl::StatusOr<TpuNode> GetNode(const TpuTarget& target, const Deadline& deadline,
                                  CancelToken* cancel) override;
  absl::Status RunVerb(const TpuTarget& target, NodeVerb verb, const Deadline& deadline,
                       const TpuCall& call) override;

 private:
  // Polls the operation until done; its error, DeadlineExceeded, or OK.
  absl::Status AwaitOperation(TpuOperation op, NodeVerb verb, const Deadline& deadline, const TpuCall& call);

  TpuApiClient api_;
};

}  // namespace tpud
