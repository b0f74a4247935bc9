// The vocabulary of failure classification: classes, recovery actions, rules
// and the verdict on one attempt. Plain types with no RE2 in sight, so the
// config parser can build FailureRules (from a job spec's `failure_rules:`)
// without depending on the classifier; see classifier.h for the matching.
#pragma once

#include <compare>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tpud {

// Why an attempt failed. The built-in signatures of each class, with the public
// source of their wording, are in builtin_rules.h and the README's table.
enum class FailureClass {
  kDeadlineExceeded,  // A collective/RPC deadline or coordination heartbeat ran out.
  kConnection,        // Lost the connection to a worker or coordinator (gRPC UNAVAILABLE).
  kPreemption,        // The TPU node or a connected worker was preempted.
  kDeviceBusy,        // The TPU is held by another process or a stale libtpu lock.
  kCrash,             // A CHECK failure, absl fatal log or crash signal.
  kHang,              // No output / step progress before the hang timeout.
  kHbmOom,            // The program does not fit in TPU HBM (deterministic).
  kUserError,         // A deterministic bug or misconfiguration in the job.
  kHardware,          // A TPU core halted (hardware, network or power fault).
  kCpuFallback,       // The framework found no TPU and silently ran on the CPU.
  kUnknown,           // Nothing recognisable: decided by the exit status alone.
};

// What the supervisor should do about a failure.
enum class RecoveryAction {
  kRestart,          // Restart from the newest checkpoint (after the usual backoff).
  kResetAndRestart,  // Reset the TPU (stop holders, clear the lock, or reset the node), restart.
  kWaitAndRestart,   // Wait until the node is usable again (start it if stopped), then restart.
  kFail,             // Do not retry: the failure is deterministic and needs a human.
};

// "deadline_exceeded", "connection", "preemption", "device_busy", "crash",
// "hang", "hbm_oom", "user_error", "hardware", "cpu_fallback", "unknown".
// Never null; the string is static.
inline constexpr FailureClass kAllFailureClasses[] = {
    FailureClass::kDeadlineExceeded, FailureClass::kConnection, FailureClass::kPreemption,
    FailureClass::kDeviceBusy,       FailureClass::kCrash,      FailureClass::kHang,
    FailureClass::kHbmOom,           FailureClass::kUserError,  FailureClass::kHardware,
    FailureClass::kCpuFallback,      FailureClass::kUnknown};

const char* FailureClassName(FailureClass failure_class);
// The inverse of FailureClassName: exact, lower-case names only; nullopt otherwise.
std::optional<FailureClass> ParseFailureClass(std::string_view name);

// "restart", "reset_and_restart", "wait_and_restart", "fail". Never null; static.
const char* RecoveryActionName(RecoveryAction action);
// The inverse of RecoveryActionName: exact, lower-case names only; nullopt otherwise.
std::optional<RecoveryAction> ParseRecoveryAction(std::string_view name);

// One classification rule: what a job spec's `failure_rules:` entries become,
// and the shape of the built-in rules (builtin_rules.h).
struct FailureRule {
  std::string match;  // RE2, searched (unanchored, case-sensitive) in one output line.
  FailureClass failure_class = FailureClass::kUnknown;
  RecoveryAction action = RecoveryAction::kRestart;
  std::string hint;   // One line for humans; may be empty.

  bool operator==(const FailureRule&) const = default;  // For config reload.
  auto operator<=>(const FailureRule&) const = default;  // For sharing classifiers.
};

// The verdict on one ended attempt (AttemptScanner::Classify).
struct Classification {
  FailureClass failure_class = FailureClass::kUnknown;
  RecoveryAction action = RecoveryAction::kRestart;
  std::string hint;          // One line for humans; may be empty for a user rule without one.
  // The output line that decided it, at most kMaxMatchedLineBytes (cut at a
  // UTF-8 boundary); empty when decided by the exit status or a hang.
  std::string matched_line;
  // Its 1-based number among the lines the attempt printed; 0 with no line.
  std::size_t matched_line_number = 0;
  // What decided it: "user:0" (failure_rules[0]), "builtin:hbm_oom", "hang",
  // "exit:signal SIGABRT", "exit:code 1", "exit:spawn_error".
  std::string rule;

  static constexpr std::size_t kMaxMatchedLineBytes = 2048;
  bool operator==(const Classification&) const = default;
};

}  // namespace tpud
