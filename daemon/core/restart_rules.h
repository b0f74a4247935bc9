// The restart rules a lone job (supervisor/job_machine.cc) and a gang's
// leader (slice/gang_rules.cc) share, written once so both judge a failure
// the same way. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/core/failure_rule.h"
#include "daemon/core/job_spec.h"

namespace tpud {

// What the rules need of one failure.
struct FailureSeen {
  FailureClass failure_class = FailureClass::kUnknown;
  std::string rule;                  // Classification::rule: what decided the class.
  std::optional<std::int64_t> step;  // The step it reached; nullopt: unknown.
};

// True when `now` is the same failure (class and rule) at the same known step
// as `before`, the failure just before it: deterministic, so restarting again
// only burns money. Never for a preemption: a spot VM preempted twice before
// its next checkpoint was unlucky, not broken (Kubernetes' podFailurePolicy
// Ignore for disruptions).
bool IsDeterministicRepeat(const FailureSeen& now, const std::optional<FailureSeen>& before);

// The restart count after a counted failure of an attempt that ran
// `ran_seconds` (nullopt: unknown): the count starts again from 0 when the
// attempt ran policy.reset_after_seconds, then one restart is added.
// `exhausted`: that restart would be over policy.max_restarts.
struct RestartCount {
  int restarts = 0;
  bool reset = false;      // The count started again (the attempt had run long enough).
  bool exhausted = false;
};
RestartCount CountRestart(const RestartPolicy& policy, int restarts_so_far, std::optional<double> ran_seconds);

}  // namespace tpud
