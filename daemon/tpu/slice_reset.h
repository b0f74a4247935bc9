// Resets a multi-host TPU slice as a whole, through its queued resource:
// POST projects.locations.queuedResources/{qr}:reset, wait for the operation,
// then for the queued resource to be ACTIVE again (Cloud TPU v2 API,
// https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources/reset).
// nodes.stop/start, the single-VM reset, are "only available with single TPU
// nodes" and are never used on a slice.
//
// Thread-safety: Reset blocks its caller (the slice leader's thread); one
// reset at a time per object.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/tpu_config.h"
#include "daemon/gce/metadata_client.h"
#include "daemon/tpu/tpu_api_client.h"
#include "daemon/tpu/wait_clock.h"

namespace tpud {

class QueuedResourceReset {
 public:
  // `config.queued_resource` names the queued resource (a short name, or
  // "projects/P/locations/Z/queuedResources/QR"); project and zone as for
  // the node (config, else the metadata server, which also gives the token).
  QueuedResourceReset(TpuConfig config, std::shared_ptr<HttpClient> http, std::shared_ptr<const MetadataClient> metadata,
                      std::shared_ptr<WaitClock> clock);

  // Resets and waits, within tpu.reset.timeout_seconds, polling every
  // tpu.reset.poll_interval_seconds. Errors name the queued resource or
  // operation: the API's (PermissionDenied, NotFound, ...), the operation's,
  // or DeadlineExceeded when it is not ACTIVE again in time.
  absl::Status Reset(CancelToken* cancel = nullptr);

  // "projects/P/locations/Z/queuedResources/QR", resolving project and zone.
  absl::StatusOr<std::string> ResourceName(CancelToken* cancel);

 private:
  const TpuConfig config_;
  std::shared_ptr<const MetadataClient> metadata_;
  std::shared_ptr<WaitClock> clock_;
  TpuApiClient api_;
};

// The slice reset for the daemon (null when tpu.queued_resource is empty):
// the api backend's transport and token, real time.
std::function<absl::Status(CancelToken*)> MakeSliceReset(const TpuConfig& config);

}  // namespace tpud
