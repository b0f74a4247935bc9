// The "gcloud" backend: resets a TPU VM with the gcloud CLI (reference §2):
//   GCLOUD compute tpus tpu-vm {describe|stop|start} NODE --zone ZONE --project PROJECT --format=json
// run as argv (never a shell), stdin /dev/null, each run killed (its whole
// process group, SIGKILL) past min(gcloud_timeout_seconds, time left). stop and
// start block until gcloud has waited for its operation; describe prints the
// Node resource (camelCase JSON, parsed by ParseNodeJson). Reset then polls
// describe until READY and HEALTHY, as the api backend does.
//
// A failed run (non-zero exit) maps from gcloud's last stderr line, which for
// API errors reads "ERROR: (gcloud.compute.tpus.tpu-vm.describe) NOT_FOUND: ..."
// (the format gcloud prints for HttpError; treat it as a hint): NOT_FOUND ->
// NotFound, PERMISSION_DENIED -> PermissionDenied, anything else -> Unknown
// with the exit status and that line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/tpu/cloud_control.h"
#include "daemon/tpu/command_runner.h"

namespace tpud {

// Thread-safety: as TpuControl (each call runs its own gcloud).
class GcloudTpuControl final : public CloudTpuControl {
 public:
  GcloudTpuControl(TpuConfig config, std::shared_ptr<const MetadataClient> metadata,
                   std::shared_ptr<WaitClock> clock);

  std::string name() const override { return "gcloud"; }

  // The argv for `verb` ("describe", "stop", "start"), for tests and logs.
  std::vector<std::string> Argv(const std::string& verb, const TpuTarget& target) const;

 protected:
  absl::StatusOr<TpuNode> GetNode(const TpuTarget& target, const Deadline& deadline,
                                  CancelToken* cancel) override;
  absl::Status RunVerb(const TpuTarget& target, NodeVerb verb, const Deadline& deadline,
                       const TpuCall& call) override;

 private:
  // Runs gcloud for `verb`; its stdout, or the mapped error.
  absl::StatusOr<std::string> Run(const std::string& verb, const TpuTarget& target, const Deadline& deadline,
                                  CancelToken* cancel);
};

}  // namespace tpud
