#include "daemon/config/validate.h"

#include <re2/re2.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/classify/classifier.h"
#include "daemon/common/durations.h"
#include "daemon/common/text.h"
#include "daemon/config/limits.h"
#include "daemon/launch/launcher.h"
#include "daemon/supervisor/progress.h"

namespace tpud {
namespace config_internal {
namespace {

using absl::StrCat;

}  // namespace

Violation FromKeyedMessage(const absl::Status& status);

namespace {

constexpr std::pair<CheckpointLayout, const char*> kLayoutNames[] = {
    {CheckpointLayout::kAuto, "auto"},          {CheckpointLayout::kTensorflow, "tensorflow"},
    {CheckpointLayout::kOrbax, "orbax"},        {CheckpointLayout::kHuggingface, "huggingface"},
    {CheckpointLayout::kTorchDcp, "torch_dcp"}, {CheckpointLayout::kLightning, "lightning"},
    {CheckpointLayout::kPattern, "pattern"}};

MaybeViolation CheckNameAndCommand(const JobSpec& spec) {
  static const LazyRE2 kName = {"[a-z0-9][a-z0-9_.-]{0,62}"};
  if (spec.name.empty()) return Violation{"name", "required"};
  if (!RE2::FullMatch(spec.name, *kName)) {
    return Violation{"name", StrCat("must match [a-z0-9][a-z0-9_.-]{0,62}, got \"", Truncated(spec.name), "\"")};
  }
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

}  // namespace

// "progress.regex: reason" -> {progress.regex, reason}.
Violation FromKeyedMessage(const absl::Status& status) {
  const std::string message(status.message());
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return Violation{"", message};
  return Violation{message.substr(0, colon), message.substr(colon + 2)};
}

MaybeViolation CheckProgressAndRules(const JobSpec& spec) {
  if (absl::Status s = ValidateProgressSpec(spec.progress); !s.ok()) return FromKeyedMessage(s);
  if (auto classifier = FailureClassifier::Create(spec.failure_rules); !classifier.ok()) {
    return FromKeyedMessage(classifier.status());
  }
  if (SignalNumber(std::to_string(spec.checkpoint_signal)) < 0) {
    return Violation{"checkpoint_signal", StrCat("unknown signal ", spec.checkpoint_signal)};
  }
  return std::nullopt;
}

MaybeViolation FindViolation(const JobSpec& spec) {
  if (MaybeViolation v = CheckNameAndCommand(spec)) return v;
  if (MaybeViolation v = CheckExecLimits(spec)) return v;
  if (MaybeViolation v = CheckTiming(spec)) return v;
  if (MaybeViolation v = CheckCheckpoint(spec.checkpoint)) return v;
  if (MaybeViolation v = CheckStopAndLog(spec)) return v;
  return CheckProgressAndRules(spec);
}


}  // namespace config_internal

absl::Status ValidateJobSpec(const JobSpec& spec) {
  const config_internal::MaybeViolation violation = config_internal::FindViolation(spec);
  if (!violation) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(violation->key, ": ", violation->reason));
}

const char* CheckpointLayoutName(CheckpointLayout layout) {
  for (const auto& [value, name] : config_internal::kLayoutNames) {
    if (value == layout) return name;
  }
  return "unknown";
}

std::optional<CheckpointLayout> ParseCheckpointLayout(const std::string& name) {
  for (const auto& [value, layout_name] : config_internal::kLayoutNames) {
    if (name == layout_name) return value;
  }
  return std::nullopt;
}

}  // namespace tpud
