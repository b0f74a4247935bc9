// Who this worker is in its multi-host slice: the slice's name, this worker's
// id and the slice's size, from the `slice:` config, else the GCE metadata
// server, else the environment Cloud TPU VMs set.
//
// Sources: the metadata keys instance/attributes/agent-worker-number (this
// worker's id) and instance/attributes/worker-network-endpoints
// (comma-separated "hostname:uid:ip" entries in worker order), as JAX reads
// them (jax-ml/jax jax/_src/clusters/cloud_tpu_cluster.py) and torch_xla
// (torch_xla/_internal/tpu.py); the environment TPU_WORKER_ID,
// TPU_WORKER_HOSTNAMES (comma-separated) and TPU_NAME, as the same files read.
//
// Thread-safety: a pure function of its arguments (and the metadata server).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/slice_config.h"
#include "daemon/gce/metadata_client.h"

namespace tpud {

// This VM's instance name (computeMetadata/v1/instance/name); on a TPU VM
// "{node-id}-w-{worker}", the node-id shared by every worker of the slice.
inline constexpr char kInstanceNameKey[] = "instance/name";
inline constexpr char kAgentWorkerNumberKey[] = "instance/attributes/agent-worker-number";
inline constexpr char kWorkerNetworkEndpointsKey[] = "instance/attributes/worker-network-endpoints";

struct SliceIdentity {
  std::string name;
  int worker_id = 0;
  int num_workers = 1;
  std::string source;  // Where each came from, for logs: "name: config, worker_id: metadata, num_workers: env".
};

// Looks up the environment; returns nullopt for an unset variable.
using GetEnv = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> ProcessEnv(const std::string& name);

// Resolves each of name, worker_id and num_workers from the first source that
// has it: `slice` (the config), then (for worker_id and num_workers) the
// metadata server when `metadata` is not null, then the environment; the
// name falls back to `tpu_name` (the tpu.name key), then the node's own name
// from the metadata server (instance/name without its "-w-N"); never
// $TPU_NAME, which many TPU VMs set to "local".
// FailedPrecondition naming what is missing and every source tried, e.g.
// "slice.worker_id is auto, and neither the metadata server
// (instance/attributes/agent-worker-number: ...) nor $TPU_WORKER_ID has it";
// InvalidArgument for a value that is not a number or out of range.
absl::StatusOr<SliceIdentity> ResolveSliceIdentity(const SliceConfig& slice, const std::string& tpu_name,
                                                   const MetadataClient* metadata, const GetEnv& getenv);

}  // namespace tpud
