// The job spec: what a job is (command, env, user, checkpoints, policies,
// hang detection, failure rules), however it arrived (a config file, `tpuctl
// start -f`, an ad hoc request), and the rules every spec obeys. The YAML
// reading is daemon/config/config.h; these are the plain types every layer
// uses, with the one validation they all share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/core/failure_rule.h"

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
  // Names of `env` variables an incident bundle's env.txt shows as they are,
  // though their name or value looks secret (incident/bundle.h RedactEnv).
  std::vector<std::string> unredacted_env;
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
  // One gang across every worker of the slice (core/gang.h): needs the
  // daemon's `slice:` section. {worker_id} and {num_workers} in command, env
  // values, working_dir, checkpoint.dir and progress.heartbeat_file are
  // expanded per worker (ExpandWorker).
  bool gang = false;

  bool operator==(const JobSpec&) const = default;  // For reload (daemon/app/reload.h).
};

// `spec` as worker `worker_id` of `num_workers` runs it: "{worker_id}" and
// "{num_workers}" replaced in command args, env values, working_dir,
// checkpoint.dir and progress.heartbeat_file (so one gang spec serves every
// worker, also several workers sharing one machine). Other braces
// ({checkpoint}, {step} in resume_args) are left alone.
JobSpec ExpandWorker(JobSpec spec, int worker_id, int num_workers);

// The one job-name rule: [a-z0-9][a-z0-9_.-]{0,62}, so at most 63 bytes,
// never "." or "..", never a '/': a name is also a file name (the job log,
// the attempt directory). OK, or InvalidArgument naming `field`:
// "name: required" (unless `required` is false), "name: 100 bytes, more than
// the limit of 63", or `name: must match [a-z0-9][a-z0-9_.-]{0,62}, got
// "Bad\x01"` (C-escaped).
inline constexpr std::size_t kMaxJobNameBytes = 63;
absl::Status CheckJobName(absl::string_view field, absl::string_view name, bool required = true);

// The first rule `spec` breaks: the key it names (relative to the spec, e.g.
// "restart.max_restarts") and why ("must be >= 0, got -1"). The config reader
// uses the key to point at the line.
struct SpecViolation {
  std::string key;
  std::string reason;
};
std::optional<SpecViolation> FindSpecViolation(const JobSpec& spec);

// Checks the rules every spec obeys however it arrived (YAML, ad hoc request):
// name syntax, non-empty command, non-negative durations, known layouts.
// The error names the key, e.g. "name: must match [a-z0-9][a-z0-9_.-]{0,62}, got \"Bad\"".
absl::Status ValidateJobSpec(const JobSpec& spec);

// The progress section's own rules (ValidateJobSpec checks them too):
// InvalidArgument naming the key, e.g. `progress.regex: <RE2 error>`
// (likewise progress.restore_regex), durations (core/durations.h),
// safety_factor < 1, min_steps < 1, and learn_timeout with neither a regex nor
// a heartbeat_file (arbitrary output is too noisy to learn from).
absl::Status ValidateProgressSpec(const ProgressSpec& spec);

// The failure rules' own rules: each `match` a non-empty RE2, e.g.
// "failure_rules[2].match: missing ): (abc" or "failure_rules[0].match: must
// not be empty" (an empty pattern would match every line).
absl::Status ValidateFailureRules(const std::vector<FailureRule>& rules);

// "auto", "tensorflow", ...; and back (nullopt for an unknown name).
const char* CheckpointLayoutName(CheckpointLayout layout);
std::optional<CheckpointLayout> ParseCheckpointLayout(const std::string& name);

}  // namespace tpud
