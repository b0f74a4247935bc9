// The `tpu:` section of tpud.yaml: which TPU control backend resets the TPU and
// how. Parsing is the config module's job; ValidateTpuConfig checks values and
// names the offending key ("tpu.timeout_seconds: must be > 0, got -1").
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tpud {

struct TpuConfig {
  // "none" (no TPU control), "api" (Cloud TPU v2 REST), "gcloud" (the gcloud
  // CLI), or "local" (stop the processes holding this host's TPU devices).
  std::string backend = "none";

  // The node: `name` empty means $TPU_NAME (api, gcloud; "local" is not a node
  // name). `project`/`zone` empty mean the metadata server's
  // project/project-id and instance/zone.
  std::string name, project, zone;
  // A multi-host slice's queued resource (its short name, or
  // projects/P/locations/Z/queuedResources/QR): the slice leader resets the
  // slice with queuedResources.reset. Empty: no slice-level reset.
  std::string queued_resource;
  std::string api_endpoint = "https://tpu.googleapis.com";  // api: scheme://host[:port], no path.
  std::string metadata_host;  // Empty: $GCE_METADATA_HOST, $GCE_METADATA_IP, the default host.

  double timeout_seconds = 1800;        // A whole Reset or Start, waits included.
  double poll_interval_seconds = 10;    // api, gcloud: between operation and node polls.
  double request_timeout_seconds = 30;  // api: one HTTP request (libcurl timeout).
  int max_attempts = 5;                 // api: tries per request on 429/5xx/transport errors.
  double retry_initial_seconds = 1;     // api: first retry delay, doubling...
  double retry_max_seconds = 30;        // ...up to this.

  std::string gcloud_path = "gcloud";   // gcloud: argv[0]; without '/', looked up in PATH.
  double gcloud_timeout_seconds = 600;  // gcloud: one run; killed (SIGKILL) past it.

  // local: device files (glob patterns) and libtpu's lock file. Source:
  // openxla/xla xla/stream_executor/tpu/tpu_initialize_util.cc; jax-ml/jax#10192.
  std::vector<std::string> device_globs = {"/dev/accel*", "/dev/vfio/*"};
  std::string lock_file = "/tmp/libtpu_lockfile";
  std::string proc_root = "/proc";                     // local: where /proc is (tests may point elsewhere).
  std::vector<int> stop_signals = {SIGTERM, SIGKILL};  // local: sent to each holder in order...
  double stop_grace_seconds = 10;                      // ...waiting this long after each for it to exit.
  double local_poll_interval_seconds = 0.1;            // local: between checks that holders are gone.

  bool operator==(const TpuConfig&) const = default;  // For config reload.
};

// OK, or InvalidArgument naming the first bad key as "tpu.<key>: <reason>".
// Does not resolve the node, project or zone (that needs the environment).
absl::Status ValidateTpuConfig(const TpuConfig& config);

// `tpu.reset:` beyond the backend: how often tpud resets the TPU on its own
// (daemon/tpu/tpu_recovery.h). Resets by hand (`tpuctl reset-tpu`) count
// against the budget but are never refused by it.
struct TpuResetPolicy {
  int max_resets_per_hour = 6;           // Automatic resets (node or local) in any 3600 s window.
  double backoff_initial_seconds = 60;   // Wait after a reset before the next one, doubling...
  double backoff_max_seconds = 900;      // ...with each reset in the window, up to this.

  bool operator==(const TpuResetPolicy&) const = default;
};

// OK, or InvalidArgument as "tpu.reset.<key>: <reason>".
absl::Status ValidateTpuResetPolicy(const TpuResetPolicy& policy);

// `tpu.preflight:`: the checks before each attempt (daemon/tpu/tpu_checks.h),
// made when a reset backend is configured.
struct TpuPreflightPolicy {
  bool enabled = true;
  bool require_devices = false;  // A missing device file (device_globs) fails the check.

  bool operator==(const TpuPreflightPolicy&) const = default;
};

}  // namespace tpud
