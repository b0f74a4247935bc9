// TPU control: describe a Cloud TPU node and reset or start it, or free this
// host's TPU devices. Blocking calls, meant for a worker thread (never the
// event loop); every wait is cancellable through a CancelToken.
//
// Backends (TpuConfig::backend):
//   api     Cloud TPU v2 REST (api_control.h);
//   gcloud  `gcloud compute tpus tpu-vm ...` (gcloud_control.h);
//   local   stop the processes holding /dev/accel* / /dev/vfio/* and remove a
//           stale libtpu lock file (local_control.h).
//
// Facts about nodes (fields, states, health values) come from
// the Cloud TPU API (googleapis google/cloud/tpu/v2/cloud_tpu.proto;
// https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/gce/http_client.h"
#include "daemon/gce/metadata_client.h"
#include "daemon/core/tpu_config.h"
#include "daemon/tpu/wait_clock.h"

namespace tpud {

// Node.state and Node.health values used by tpud (the API has more; they pass
// through as strings).
inline constexpr char kNodeReady[] = "READY";
inline constexpr char kNodeStopped[] = "STOPPED";
inline constexpr char kNodeStopping[] = "STOPPING";
inline constexpr char kNodePreempted[] = "PREEMPTED";
inline constexpr char kNodeHealthy[] = "HEALTHY";

// Node.symptoms[]: {createTime, symptomType, details, workerId}.
struct Symptom {
  std::string create_time;   // RFC 3339, as the API sends it.
  std::string symptom_type;  // LOW_MEMORY, OUT_OF_MEMORY, EXECUTE_TIMED_OUT, MESH_BUILD_FAIL, ...
  std::string details;
  std::string worker_id;
};

// What tpud reads of a Node. Empty strings where the API sent nothing.
struct TpuNode {
  std::string name;                // "projects/p/locations/z/nodes/n".
  std::string state;               // Node.state, e.g. READY, STOPPED, STARTING, PREEMPTED.
  std::string health;              // Node.health, e.g. HEALTHY, UNHEALTHY_MAINTENANCE.
  std::string health_description;  // Node.healthDescription.
  std::vector<Symptom> symptoms;
  std::string accelerator_type;  // Node.acceleratorType, e.g. "v4-8".

  // state READY and health HEALTHY. Both count: a node in maintenance may be
  // READY and UNHEALTHY_MAINTENANCE at once (reference §1).
  bool ReadyAndHealthy() const { return state == kNodeReady && health == kNodeHealthy; }
  // "state READY, health HEALTHY" (health omitted when empty).
  std::string Summary() const;
};

// Parses a Node resource (camelCase JSON, as the REST API and
// `gcloud ... describe --format=json` print it). InvalidArgument when the text
// is not a JSON object; missing fields stay empty.
absl::StatusOr<TpuNode> ParseNodeJson(const std::string& json);

// The node a cloud backend acts on.
struct TpuTarget {
  std::string project, zone, node;
  // "projects/{project}/locations/{zone}/nodes/{node}", the API's node name.
  std::string ResourceName() const;
};

// Fills the target from `config`: node from config.name, else $TPU_NAME
// (FailedPrecondition when neither names a node; "local" does not); project
// and zone from the config, else from the metadata server (project/project-id;
// the last segment of instance/zone). Errors from the metadata server are
// returned with context ("tpu zone from metadata: ..."). Reads the environment.
absl::StatusOr<TpuTarget> ResolveTpuTarget(const TpuConfig& config, const MetadataClient& metadata,
                                           CancelToken* cancel);

// One line of progress ("stop requested", "operation operation-123 done",
// "state STARTING"), for the incident record. Called on the calling thread.
using TpuProgress = std::function<void(const std::string& line)>;

// The per-call context of Reset and Start.
struct TpuCall {
  CancelToken* cancel = nullptr;  // Optional, not owned; must outlive the call.
  TpuProgress progress;           // Optional.
  // local: processes that are never signalled (tpud's own supervised
  // attempts), by pid or process group id. Ignored by api and gcloud.
  std::vector<int> spare_pids;
  std::vector<int> spare_pgids;

  void Report(const std::string& line) const {
    if (progress) progress(line);
  }
};

// Thread-safety: all methods may be called from any thread, concurrently
// (shared state such as the cached token is locked). Mutating calls on one
// node should still be serialized by the caller: two concurrent Resets would
// interleave their stop and start requests.
class TpuControl {
 public:
  virtual ~TpuControl() = default;

  // The node's state, health and symptoms (retries within timeout_seconds).
  // Errors: NotFound, PermissionDenied (naming the node); Unavailable /
  // DeadlineExceeded for transport trouble; FailedPrecondition or the metadata
  // server's error when the target cannot be resolved (ResolveTpuTarget);
  // Cancelled. The local backend answers Unimplemented.
  virtual absl::StatusOr<TpuNode> Describe(CancelToken* cancel) = 0;

  // Cloud backends: stops the node (skipped when already STOPPING, STOPPED
  // or PREEMPTED), starts it once STOPPED/PREEMPTED, then waits for READY and HEALTHY, all within
  // TpuConfig::timeout_seconds. Stop is "only available with single TPU nodes"
  // (reference §1): a multi-host slice fails with the API's error.
  // local: stops the holders of the TPU devices and the lock file, waits until
  // the devices are free, and removes the lock file if stale.
  // Errors: as Describe; an operation that ends in error{code,message} gives
  // that google.rpc code (e.g. FailedPrecondition) and message; the API's
  // refusal of a request (e.g. stopping a node in a state that forbids it) its
  // code; DeadlineExceeded naming the last state seen ("node
  // projects/p/locations/z/nodes/n stuck in STARTING for 1800 s"); Cancelled.
  virtual absl::Status Reset(const TpuCall& call) = 0;

  // Cloud backends: starts a STOPPED or PREEMPTED node (no request when it is
  // already starting or READY) and waits for READY (health not required: a
  // freshly started node may report health late). Errors as Reset.
  // local: Unimplemented.
  virtual absl::Status Start(const TpuCall& call) = 0;

  // "api", "gcloud" or "local".
  virtual std::string name() const = 0;
};

// Seams for MakeTpuControl; null members get the real thing.
struct TpuDeps {
  std::shared_ptr<HttpClient> http;                // libcurl.
  std::shared_ptr<const MetadataClient> metadata;  // MetadataBaseUrl(config.metadata_host).
  std::shared_ptr<WaitClock> clock;                // SystemWaitClock().
};

// The backend named by config.backend, or nullptr for "none". Validates the
// config first (InvalidArgument naming the key). Does no I/O: the target is
// resolved on first use.
absl::StatusOr<std::unique_ptr<TpuControl>> MakeTpuControl(const TpuConfig& config, TpuDeps deps = {});

}  // namespace tpud
