#include "daemon/core/job_spec.h"

#include <re2/re2.h>

#include <cmath>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/core/durations.h"
#include "daemon/core/exit_status.h"
#include "daemon/core/limits.h"
#include "daemon/core/text.h"

namespace tpud {
namespace {

using absl::StrCat;
using Violation = SpecViolation;
using MaybeViolation = std::optional<SpecViolation>;

// "progress.regex: reason" -> {progress.regex, reason}.
Violation FromKeyedMessage(const absl::Status& status) {
  const std::string message(status.message());
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return Violation{"", message};
  return Violation{message.substr(0, colon), message.substr(colon + 2)};
}

constexpr std::pair<CheckpointLayout, const char*> kLayoutNames[] = {
    {CheckpointLayout::kAuto, "auto"},          {CheckpointLayout::kTensorflow, "tensorflow"},
    {CheckpointLayout::kOrbax, "orbax"},        {CheckpointLayout::kHuggingface, "huggingface"},
    {CheckpointLayout::kTorchDcp, "torch_dcp"}, {CheckpointLayout::kLightning, "lightning"},
    {CheckpointLayout::kPattern, "pattern"}};

MaybeViolation CheckNameAndCommand(const JobSpec& spec) {
  if (absl::Status s = CheckJobName("name", spec.name); !s.ok()) return FromKeyedMessage(s);
  if (spec.command.empty()) return Violation{"command", "required: a non-empty list of strings (argv)"};
  if (spec.command[0].empty()) return Violation{"command[0]", "must not be empty"};
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return Violation{"env", StrCat("invalid variable name \"", Truncated(key), "\"")};
    }
  }
  // useradd(8)'s rule for names (plus digits, for a uid or gid given as a number).
  static const LazyRE2 kAccount = {"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\\$?"};
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"user", &spec.user},
                                   {"group", &spec.group}}) {
    if (!value->empty() && !RE2::FullMatch(*value, *kAccount)) {
      return Violation{key, StrCat("must be a user/group name or number, got \"", Truncated(*value), "\"")};
    }
  }
  return std::nullopt;
}

// An execve(2) string: within kMaxArgBytes and without NUL (which would cut it short).
MaybeViolation CheckExecString(const std::string& key, const std::string& text, std::size_t* total) {
  *total += text.size() + 1;
  if (text.size() > kMaxArgBytes) {
    return Violation{key, StrCat("longer than ", kMaxArgBytes, " bytes (", text.size(), ")")};
  }
  if (text.find('\0') != std::string::npos) return Violation{key, "must not contain a NUL byte"};
  return std::nullopt;
}

// The limits of limits.h: what execve(2) accepts, and what tpud copies.
MaybeViolation CheckExecLimits(const JobSpec& spec) {
  if (spec.command.size() + spec.resume_args.size() > kMaxArgCount) {
    return Violation{"command", StrCat("more than ", kMaxArgCount, " arguments with resume_args")};
  }
  if (spec.env.size() > kMaxEnvCount) return Violation{"env", StrCat("more than ", kMaxEnvCount, " variables")};
  std::size_t total = 0;
  for (const auto* list : {&spec.command, &spec.resume_args}) {
    const char* name = list == &spec.command ? "command" : "resume_args";
    for (size_t i = 0; i < list->size(); ++i) {
      if (auto v = CheckExecString(StrCat(name, "[", i, "]"), (*list)[i], &total)) return v;
    }
  }
  for (const auto& [key, value] : spec.env) {
    if (auto v = CheckExecString(StrCat("env.", key), StrCat(key, "=", value), &total)) return v;
  }
  if (total > kMaxExecBytes) {
    return Violation{"command", StrCat("command, resume_args and env exceed ", kMaxExecBytes, " bytes in total")};
  }
  const std::string& dir = spec.working_dir.native();
  if (dir.size() > kMaxPathBytes || dir.find('\0') != std::string::npos) {
    return Violation{"working_dir", StrCat("must be a path of at most ", kMaxPathBytes, " bytes without NUL")};
  }
  return std::nullopt;
}

MaybeViolation CheckTiming(const JobSpec& spec) {
  const RestartPolicy& restart = spec.restart;
  const std::pair<const char*, double> durations[] = {
      {"start_seconds", spec.start_seconds},
      {"restart.backoff_initial_seconds", restart.backoff_initial_seconds},
      {"restart.backoff_max_seconds", restart.backoff_max_seconds},
      {"restart.reset_after_seconds", restart.reset_after_seconds},
      {"stop.grace_seconds", spec.stop.grace_seconds}};
  for (const auto& [key, seconds] : durations) {
    if (absl::Status s = CheckDurationSeconds(key, seconds); !s.ok()) return FromKeyedMessage(s);
  }
  if (restart.max_restarts < 0) {
    return Violation{"restart.max_restarts", StrCat("must be >= 0, got ", restart.max_restarts)};
  }
  if (restart.backoff_max_seconds < restart.backoff_initial_seconds) {
    return Violation{"restart.backoff_max_seconds",
                     StrCat("must be >= restart.backoff_initial_seconds (", restart.backoff_initial_seconds,
                            "), got ", restart.backoff_max_seconds)};
  }
  if (!(restart.backoff_jitter >= 0 && restart.backoff_jitter <= 1)) {
    return Violation{"restart.backoff_jitter",
                     StrCat("must be between 0 and 1, got ", restart.backoff_jitter)};
  }
  return std::nullopt;
}

MaybeViolation CheckCheckpoint(const CheckpointSpec& checkpoint) {
  const std::string layout = CheckpointLayoutName(checkpoint.layout);
  if (layout == "unknown") return Violation{"checkpoint.layout", "unknown layout"};
  if (checkpoint.layout != CheckpointLayout::kPattern && !checkpoint.pattern.empty()) {
    return Violation{"checkpoint.pattern", StrCat("only allowed with layout pattern, got layout ", layout)};
  }
  if (checkpoint.layout == CheckpointLayout::kPattern) {
    if (checkpoint.pattern.empty()) return Violation{"checkpoint.pattern", "required with layout pattern"};
    const RE2 re(checkpoint.pattern, RE2::Quiet);
    if (!re.ok()) return Violation{"checkpoint.pattern", StrCat("invalid RE2 pattern: ", re.error())};
    if (re.NumberOfCapturingGroups() < 1) {
      return Violation{"checkpoint.pattern", "needs a capture group for the step, e.g. ckpt-(\\d+)"};
    }
  }
  if (checkpoint.dir.empty() && checkpoint.layout != CheckpointLayout::kAuto) {
    return Violation{"checkpoint.dir", StrCat("required with layout ", layout)};
  }
  return std::nullopt;
}

MaybeViolation CheckStopAndLog(const JobSpec& spec) {
  const std::vector<int>& signals = spec.stop.signals;
  if (signals.empty()) return Violation{"stop.signals", "must not be empty"};
  for (size_t i = 0; i < signals.size(); ++i) {
    if (SignalNumber(std::to_string(signals[i])) < 0) {
      return Violation{StrCat("stop.signals[", i, "]"), StrCat("unknown signal ", signals[i])};
    }
  }
  // Rotation renames every backup on each rotation, in the shim that also
  // writes the log: two billion backups once spun it at 95 % CPU and froze
  // the log (and tiny files make it rotate on every write).
  if (spec.log.backups < 0 || spec.log.backups > kMaxLogBackups) {
    return Violation{"log.backups", StrCat("must be between 0 and ", kMaxLogBackups, ", got ", spec.log.backups)};
  }
  if (spec.log.max_bytes < kMinLogMaxBytes) {
    return Violation{"log.max_bytes",
                     StrCat("must be at least ", kMinLogMaxBytes, " (64KiB), got ", spec.log.max_bytes)};
  }
  return std::nullopt;
}

MaybeViolation CheckProgressAndRules(const JobSpec& spec) {
  if (absl::Status s = ValidateProgressSpec(spec.progress); !s.ok()) return FromKeyedMessage(s);
  if (absl::Status s = ValidateFailureRules(spec.failure_rules); !s.ok()) return FromKeyedMessage(s);
  if (SignalNumber(std::to_string(spec.checkpoint_signal)) < 0) {
    return Violation{"checkpoint_signal", StrCat("unknown signal ", spec.checkpoint_signal)};
  }
  return std::nullopt;
}

absl::Status CheckLearning(const ProgressSpec& spec) {
  if (!spec.learn_timeout) return absl::OkStatus();
  if (spec.safety_factor < 1) {
    return absl::InvalidArgumentError(StrCat("progress.safety_factor: must be >= 1, got ", spec.safety_factor));
  }
  if (spec.min_steps < 1) {
    return absl::InvalidArgumentError(StrCat("progress.min_steps: must be >= 1, got ", spec.min_steps));
  }
  if (spec.regex.empty() && spec.heartbeat_file.empty()) {
    return absl::InvalidArgumentError(
        "progress.learn_timeout: needs progress.regex or progress.heartbeat_file "
        "(arbitrary output is too noisy to learn step intervals from)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJobName(absl::string_view field, absl::string_view name, bool required) {
  static const LazyRE2 kName = {"[a-z0-9][a-z0-9_.-]{0,62}"};
  if (name.empty()) {
    return required ? absl::InvalidArgumentError(StrCat(field, ": required")) : absl::OkStatus();
  }
  if (name.size() > kMaxJobNameBytes) {
    return absl::InvalidArgumentError(
        StrCat(field, ": ", name.size(), " bytes, more than the limit of ", kMaxJobNameBytes));
  }
  if (!RE2::FullMatch(re2::StringPiece(name.data(), name.size()), *kName)) {
    return absl::InvalidArgumentError(  // At most 63 bytes here: shown whole, escaped.
        StrCat(field, ": must match [a-z0-9][a-z0-9_.-]{0,62}, got \"", absl::CHexEscape(name), "\""));
  }
  return absl::OkStatus();
}

std::optional<SpecViolation> FindSpecViolation(const JobSpec& spec) {
  if (MaybeViolation v = CheckNameAndCommand(spec)) return v;
  if (MaybeViolation v = CheckExecLimits(spec)) return v;
  if (MaybeViolation v = CheckTiming(spec)) return v;
  if (MaybeViolation v = CheckCheckpoint(spec.checkpoint)) return v;
  if (MaybeViolation v = CheckStopAndLog(spec)) return v;
  return CheckProgressAndRules(spec);
}

absl::Status ValidateJobSpec(const JobSpec& spec) {
  const MaybeViolation violation = FindSpecViolation(spec);
  if (!violation) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(violation->key, ": ", violation->reason));
}

absl::Status ValidateProgressSpec(const ProgressSpec& spec) {
  for (const auto& [key, regex] : {std::pair<const char*, const std::string*>{"progress.regex", &spec.regex},
                                   {"progress.restore_regex", &spec.restore_regex}}) {
    if (regex->empty()) continue;
    const RE2 re(*regex, RE2::Quiet);
    if (!re.ok()) return absl::InvalidArgumentError(StrCat(key, ": ", re.error()));
  }
  if (absl::Status s = CheckDurationSeconds("progress.startup_grace_seconds", spec.startup_grace_seconds); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckDurationSeconds("progress.timeout_seconds", spec.timeout_seconds); !s.ok()) return s;
  return CheckLearning(spec);
}

absl::Status ValidateFailureRules(const std::vector<FailureRule>& rules) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxRegexpMemoryBytes);
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const std::string where = StrCat("failure_rules[", i, "].match");
    if (rules[i].match.empty()) return absl::InvalidArgumentError(where + ": must not be empty");
    const RE2 re(rules[i].match, options);
    if (!re.ok()) return absl::InvalidArgumentError(StrCat(where, ": ", re.error()));
  }
  return absl::OkStatus();
}

const char* CheckpointLayoutName(CheckpointLayout layout) {
  for (const auto& [value, name] : kLayoutNames) {
    if (value == layout) return name;
  }
  return "unknown";
}

std::optional<CheckpointLayout> ParseCheckpointLayout(const std::string& name) {
  for (const auto& [value, layout_name] : kLayoutNames) {
    if (name == layout_name) return value;
  }
  return std::nullopt;
}

JobSpec ExpandWorker(JobSpec spec, int worker_id, int num_workers) {
  const std::vector<std::pair<std::string, std::string>> replacements = {
      {"{worker_id}", std::to_string(worker_id)}, {"{num_workers}", std::to_string(num_workers)}};
  const auto expand = [&](const std::string& text) { return absl::StrReplaceAll(text, replacements); };
  const auto expand_path = [&](const std::filesystem::path& path) {
    return std::filesystem::path(expand(path.string()));
  };
  for (std::string& arg : spec.command) arg = expand(arg);
  for (auto& [name, value] : spec.env) value = expand(value);
  spec.working_dir = expand_path(spec.working_dir);
  spec.checkpoint.dir = expand_path(spec.checkpoint.dir);
  spec.progress.heartbeat_file = expand_path(spec.progress.heartbeat_file);
  return spec;
}

}  // namespace tpud
