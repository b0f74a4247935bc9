// Daemon configuration: the YAML contract of tpud.yaml and jobs.d/*.yaml. The
// job spec itself (JobSpec and its rules) is vocabulary every layer shares:
// daemon/core/job_spec.h.
//
// Every key is typed and defaulted; an unknown key is an error so typos never
// pass silently. Errors name the file, the line and the key, e.g.
//   /etc/tpud/jobs.d/digits.yaml:7: restart.max_restarts: must be >= 0, got -1
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/job_spec.h"
#include "daemon/core/slice_config.h"
#include "daemon/core/tpu_config.h"

namespace tpud {

struct MetricsConfig {
  std::string listen = "127.0.0.1:9464";    // host:port; port 0 picks a free one. Empty: off.
};

// Incident bundles (daemon/incident/bundle.h), under state_dir/incidents.
struct IncidentConfig {
  bool capture = true;       // Off: no bundles at all.
  int capture_seconds = 10;  // 1..300: how long a capture may take (and hold a hang's first stop signal).
  int keep = 20;             // 1..10000: bundles kept per job, the oldest removed first.
  // All bundles together (incident/retention.h); 0: no cap. The oldest go
  // first, a removed job's before any other.
  std::uint64_t max_bytes = 1ull << 30;
  int removed_keep_days = 7;  // 0..3650: how long a removed job's bundles stay.
  bool operator==(const IncidentConfig&) const = default;
};

// Watching the GCE metadata server for preemption and maintenance events
// (cloud.google.com/compute/docs/metadata/predefined-metadata-keys).
struct GceMetadataConfig {
  std::string enabled = "auto";  // auto (probe once, quietly) | true | false.
  std::string host;              // host[:port]; empty: $GCE_METADATA_HOST, else metadata.google.internal.
};

struct DaemonConfig {
  std::filesystem::path config_path;         // The file this was loaded from.
  std::filesystem::path socket = "/run/tpud/tpud.sock";
  // Who may use the socket (daemon/rpc/peer_auth.h): root, the daemon's own
  // uid, and members of socket_group (a name or a number; empty: the daemon's
  // own group). socket_mode: permission bits of the socket file, octal in YAML.
  std::string socket_group;
  std::uint32_t socket_mode = 0660;
  std::filesystem::path state_dir = "/var/lib/tpud";
  std::filesystem::path log_dir = "/var/log/tpud";
  MetricsConfig metrics;
  std::filesystem::path jobs_dir;            // Optional directory of *.yaml job specs.
  std::vector<JobSpec> jobs;                 // Inline jobs, then jobs_dir's, in file name order.
  GceMetadataConfig gce_metadata;
  // How attempts are run: "shim" (each under its own tpud-shim, so training
  // outlives tpud restarts and upgrades) or "local" (children of tpud).
  std::string launcher = "shim";
  // Whether SIGTERM to tpud stops every job first. With the shim launcher the
  // default leaves them running for the next tpud to re-attach; the local
  // launcher always stops them (they cannot outlive tpud's pipes).
  bool stop_jobs_on_exit = false;
  // Where each attempt gets a cgroup of its own, so ending it ends every
  // process it started (launch/attempt_cgroup.h): "auto" (the cgroup systemd
  // delegates to the unit, Delegate=yes; none without one), "none", or a
  // cgroup v2 directory.
  std::string cgroup_root = "auto";
  // The `tpu:` section (daemon/config/tpu_section.h): the node, and how and
  // how often tpud resets it (daemon/tpu/tpu_recovery.h). Default backend none.
  TpuConfig tpu;
  TpuResetPolicy tpu_reset;
  TpuPreflightPolicy tpu_preflight;
  // The `slice:` section (daemon/core/slice_config.h): the multi-host slice
  // this tpud is a worker of. nullopt: this VM alone; gang jobs are refused.
  std::optional<SliceConfig> slice;
  IncidentConfig incidents;
};

// Loads tpud.yaml and the job specs of its jobs_dir. Relative paths in the file
// resolve against the file's directory. Errors: NotFound for a missing file,
// InvalidArgument for bad YAML, unknown keys, bad values and duplicate names;
// the message names the file, line and key.
absl::StatusOr<DaemonConfig> LoadDaemonConfig(const std::filesystem::path& path);

// Parses one job spec from YAML text. `source` names it in errors (a file name,
// or "request"); relative paths resolve against `base_dir`.
absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& source,
                                     const std::filesystem::path& base_dir);

// Reads and parses one job spec file, as jobs_dir's files are read (relative
// paths resolve against its directory). Errors: those of ParseJobSpec, and
// "PATH: cannot open: ..." (NotFound etc.) when the file cannot be read.
absl::StatusOr<JobSpec> LoadJobSpecFile(const std::filesystem::path& path);

// A minimal YAML job spec (name, command, working_dir, env) for ad hoc jobs,
// so they can be persisted and re-parsed like submitted ones.
std::string AdHocJobSpecYaml(const JobSpec& spec);

// `yaml_text` (one job spec, a YAML mapping) with its top-level `user` and
// `group` set to `user` and `group`, every other key kept (comments are not).
// A gang spec is published this way: the identity the submitting worker's
// admission resolved travels with it, so no other worker has to guess it.
// Errors: InvalidArgument when the text is not a YAML mapping.
absl::StatusOr<std::string> JobSpecYamlWithIdentity(const std::string& yaml_text, const std::string& user,
                                                    const std::string& group);

}  // namespace tpud
