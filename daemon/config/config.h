// Daemon configuration and job specs: the YAML contract of tpud.yaml and jobs.d/*.yaml.
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
#include "daemon/classify/failure_rule.h"
#include "daemon/tpu/tpu_config.h"

namespace tpud {

// Where checkpoints live and how to tell a complete one (see checkpoint/checkpoint.h).
enum class CheckpointLayout { kAuto, kTensorflow, kOrbax, kHuggingface, kTorchDcp, kLightning, kPattern };

struct CheckpointSpec {
  std::filesystem::path dir;  // Empty: the job has no checkpoints.
  CheckpointLayout layout = CheckpointLayout::kAuto;
  std::string pattern;        // layout: pattern — RE2 over entry names; group 1 is the step.

  bool operator==(const CheckpointSpec&) const = default;  // For reload (daemon/app/reload.h).
};

struct RestartPolicy {
  int max_restarts = 10;                    // Automatic restarts before the job is FAILED.
  double backoff_initial_seconds = 1;       // Delay before the first restart.
  double backoff_max_seconds = 300;         // Cap of the doubling delay.
  double backoff_jitter = 0.2;              // Delay is scaled by a uniform factor in [1-j, 1].
  double reset_after_seconds = 3600;        // An attempt up this long resets the restart count.

  bool operator==(const RestartPolicy&) const = default;  // For reload (daemon/app/reload.h).
};

struct StopPolicy {
  double grace_seconds = 30;                // Between rungs of the signal ladder.
  // Sent to the process group in order: SIGINT lets the training loop finish
  // its step, SIGTERM asks politely, SIGQUIT exits at once, SIGKILL cannot be
  // ignored (the troubleshooting guide's escalation).
  std::vector<int> signals = {2, 15, 3, 9};

  bool operator==(const StopPolicy&) const = default;  // For reload (daemon/app/reload.h).
};

// The job spec's `progress:` section.
struct ProgressSpec {
  // RE2, searched anywhere in a line (partial match). A matching line is
  // progress; group 1, if any, is the step. Empty: any output line is progress,
  // unless heartbeat_file is set (then only the heartbeat is).
  std::string regex;
  std::filesystem::path heartbeat_file;  // Optional: its mtime advancing is progress.
  // Optional RE2: a line the trainer prints when it starts loading a
  // checkpoint. Splits an attempt's time before its first progress into
  // startup and checkpoint_restore (goodput accounting, supervisor/goodput.h).
  std::string restore_regex;
  double startup_grace_seconds = 900;    // XLA compilation can take 5+ minutes.
  double timeout_seconds = 600;          // After progress, silence this long is a hang; 0 = none.
  bool learn_timeout = false;            // Learn a tighter timeout from observed step intervals.
  double safety_factor = 5;              // Learned timeout = safety_factor x longest interval.
  int min_steps = 20;                    // Intervals to observe before the learned value applies.
  bool configured = false;               // false: no `progress` section -> no hang timeout at all.

  bool operator==(const ProgressSpec&) const = default;  // For reload (daemon/app/reload.h).
};


struct LogPolicy {
  std::uint64_t max_bytes = 50ull << 20;    // Rotate the job log past this size.
  int backups = 10;                         // Rotated files kept: NAME.log.1 .. NAME.log.N.

  bool operator==(const LogPolicy&) const = default;  // For reload (daemon/app/reload.h).
};

struct JobSpec {
  std::string name;                          // [a-z0-9][a-z0-9_.-]{0,62}
  std::vector<std::string> command;          // argv; never run through a shell.
  std::filesystem::path working_dir;         // Empty: the daemon's state_dir.
  std::map<std::string, std::string> env;    // Added to the daemon's environment.
  // Who attempts run as: a user and group name or number (launch/run_as.h).
  // Empty user: as tpud (root for config files). Jobs submitted over the
  // socket by a non-root caller always run as that caller.
  std::string user;
  std::string group;
  bool autostart = false;
  double start_seconds = 1;                  // Up this long: STARTING -> RUNNING.
  CheckpointSpec checkpoint;
  std::vector<std::string> resume_args;      // Appended when a checkpoint exists; {checkpoint}, {step}.
  RestartPolicy restart;
  StopPolicy stop;
  LogPolicy log;
  ProgressSpec progress;                     // Hang detection; off unless configured.
  std::vector<FailureRule> failure_rules;    // Checked before the built-in rules.
  int checkpoint_signal = 15;                // Sent on a maintenance/preemption notice (SIGTERM,
                                             // as Cloud TPU Autocheckpoint does).
  std::string origin;                        // "config:FILE", "submitted:FILE", "adhoc".

  bool operator==(const JobSpec&) const = default;  // For reload (daemon/app/reload.h).
};

struct MetricsConfig {
  std::string listen = "127.0.0.1:9464";    // host:port; port 0 picks a free one. Empty: off.
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

// Checks the rules every spec obeys however it arrived (YAML, ad hoc request):
// name syntax, non-empty command, non-negative durations, known layouts.
// The error names the key, e.g. "name: must match [a-z0-9][a-z0-9_.-]{0,62}, got \"Bad\"".
absl::Status ValidateJobSpec(const JobSpec& spec);

// A minimal YAML job spec (name, command, working_dir, env) for ad hoc jobs,
// so they can be persisted and re-parsed like submitted ones.
std::string AdHocJobSpecYaml(const JobSpec& spec);

// "auto", "tensorflow", ...; and back (nullopt for an unknown name).
const char* CheckpointLayoutName(CheckpointLayout layout);
std::optional<CheckpointLayout> ParseCheckpointLayout(const std::string& name);

}  // namespace tpud
