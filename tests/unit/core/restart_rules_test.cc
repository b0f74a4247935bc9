// The restart rules a lone job and a gang's leader share (core/restart_rules.h).
#include "daemon/core/restart_rules.h"

#include <catch2/catch.hpp>

namespace tpud {
namespace {

TEST_CASE("Restart rules: the same failure at the same step twice is deterministic, never a preemption", "[core]") {
  struct Row {
    const char* what;
    FailureSeen now;
    std::optional<FailureSeen> before;
    bool deterministic;
  };
  const FailureSeen oom{FailureClass::kHbmOom, "builtin:hbm_oom", 40};
  const Row rows[] = {
      {"same class, rule and step", oom, oom, true},
      {"no failure before", oom, std::nullopt, false},
      {"another step: progress", oom, FailureSeen{FailureClass::kHbmOom, "builtin:hbm_oom", 30}, false},
      {"another rule", oom, FailureSeen{FailureClass::kHbmOom, "rule:mine", 40}, false},
      {"another class", oom, FailureSeen{FailureClass::kCrash, "builtin:hbm_oom", 40}, false},
      {"step unknown now", FailureSeen{FailureClass::kCrash, "exit", std::nullopt},
       FailureSeen{FailureClass::kCrash, "exit", std::nullopt}, false},
      {"preempted twice at one step", FailureSeen{FailureClass::kPreemption, "notice", 40},
       FailureSeen{FailureClass::kPreemption, "notice", 40}, false},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    CHECK(IsDeterministicRepeat(row.now, row.before) == row.deterministic);
  }
}

TEST_CASE("Restart rules: the budget counts restarts and starts again after a long run", "[core]") {
  RestartPolicy policy;
  policy.max_restarts = 2;
  policy.reset_after_seconds = 60;
  CHECK(CountRestart(policy, 0, 5.0).restarts == 1);
  CHECK_FALSE(CountRestart(policy, 1, 5.0).exhausted);
  const RestartCount over = CountRestart(policy, 2, 5.0);
  CHECK(over.restarts == 3);
  CHECK(over.exhausted);
  const RestartCount long_run = CountRestart(policy, 2, 61.0);
  CHECK(long_run.reset);
  CHECK(long_run.restarts == 1);
  CHECK_FALSE(long_run.exhausted);
  CHECK(CountRestart(policy, 2, std::nullopt).exhausted);  // Run time unknown: no reset.
  policy.max_restarts = 0;
  CHECK(CountRestart(policy, 0, std::nullopt).exhausted);
}

}  // namespace
}  // namespace tpud
