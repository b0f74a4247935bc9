#include "daemon/core/restart_rules.h"

namespace tpud {

bool IsDeterministicRepeat(const FailureSeen& now, const std::optional<FailureSeen>& before) {
  return now.failure_class != FailureClass::kPreemption && before && before->failure_class == now.failure_class &&
         before->rule == now.rule && before->step && now.step && *before->step == *now.step;
}

RestartCount CountRestart(const RestartPolicy& policy, int restarts_so_far, std::optional<double> ran_seconds) {
  RestartCount count;
  count.reset = ran_seconds && *ran_seconds >= policy.reset_after_seconds;
  count.restarts = count.reset ? 0 : restarts_so_far;
  ++count.restarts;
  count.exhausted = count.restarts > policy.max_restarts;
  return count;
}

}  // namespace tpud
