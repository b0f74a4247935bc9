// The `tpu:` section of tpud.yaml: the TPU node, and how tpud resets it
// (TpuConfig and TpuResetPolicy, daemon/tpu/tpu_config.h). Internal to
// daemon/config (config.cc calls ReadTpuSection).
//
//   tpu:
//     name: my-tpu            # empty: $TPU_NAME when a reset needs the node
//     project: my-project     # empty: the metadata server's project/project-id
//     zone: us-central2-b     # empty: the metadata server's instance/zone
//     api_endpoint: https://tpu.googleapis.com
//     metadata_host: ""       # for the api backend's token; empty: $GCE_METADATA_HOST, ...
//     gcloud_path: gcloud
//     device_globs: ["/dev/accel*", "/dev/vfio/*"]
//     lock_file: /tmp/libtpu_lockfile
//     reset:
//       backend: none         # api | gcloud | local | none
//       timeout_seconds: 1800 # one reset, start or maintenance wait
//       poll_interval_seconds: 10
//       stop_grace_seconds: 10
//       max_resets_per_hour: 6
//       backoff_initial_seconds: 60
//       backoff_max_seconds: 900
//     preflight:              # checks before each attempt (with a reset backend)
//       enabled: true
//       require_devices: false
#pragma once

#include "daemon/config/config.h"
#include "daemon/config/yaml_reader.h"

namespace tpud::config_internal {

// Reads `tpu:` (absent: defaults, backend none) from the top-level mapping
// `root` into config->tpu, tpu_reset and tpu_preflight, then validates them. Errors
// go to `r`, naming the file, line and key, e.g.
//   /etc/tpud/tpud.yaml:14: tpu.reset.timeout_seconds: must be > 0, got 0
void ReadTpuSection(Reader& r, const YAML::Node& root, DaemonConfig* config);

}  // namespace tpud::config_internal
