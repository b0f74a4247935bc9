// The budget and backoff of automatic TPU resets (tpu.reset.max_resets_per_hour,
// tpu.reset.backoff_*): how many resets a sliding hour allows, and how long to
// wait after the last one before the next. Pure bookkeeping on steady time.
#pragma once

#include <deque>
#include <optional>

#include "daemon/core/clock.h"
#include "daemon/core/tpu_config.h"

namespace tpud {

// Thread-safety: not thread-safe; the owner locks.
class ResetBudget {
 public:
  static constexpr Seconds kWindow{3600};

  explicit ResetBudget(TpuResetPolicy policy) : policy_(policy) {}

  // Resets started within kWindow before `now`.
  int CountInWindow(SteadyTime now);
  // Whether another automatic reset may start at `now` (fewer than
  // max_resets_per_hour in the window).
  bool Allows(SteadyTime now) { return CountInWindow(now) < policy_.max_resets_per_hour; }
  // How long to wait at `now` before the next reset starts: the backoff after
  // the last one (backoff_initial_seconds, doubling with each reset in the
  // window, at most backoff_max_seconds) less the time since it ended; zero
  // when none is recent.
  Seconds WaitBefore(SteadyTime now);
  // A reset ran from `start` to `end` (by hand or automatic).
  void Record(SteadyTime start, SteadyTime end);

  const TpuResetPolicy& policy() const { return policy_; }

 private:
  void Expire(SteadyTime now);

  const TpuResetPolicy policy_;
  std::deque<SteadyTime> starts_;  // Oldest first, within the window.
  std::optional<SteadyTime> last_end_;
};

}  // namespace tpud
