#include "daemon/tpu/reset_budget.h"

#include <algorithm>
#include <cmath>

namespace tpud {

void ResetBudget::Expire(SteadyTime now) {
  while (!starts_.empty() && now - starts_.front() >= kWindow) starts_.pop_front();
}

int ResetBudget::CountInWindow(SteadyTime now) {
  Expire(now);
  return static_cast<int>(starts_.size());
}

Seconds ResetBudget::WaitBefore(SteadyTime now) {
  const int recent = CountInWindow(now);
  if (recent == 0 || !last_end_) return Seconds(0);
  const double delay = std::min(policy_.backoff_max_seconds,
                                policy_.backoff_initial_seconds * std::pow(2.0, recent - 1));
  const Seconds since_last = now - *last_end_;
  return std::max(Seconds(0), Seconds(delay) - since_last);
}

void ResetBudget::Record(SteadyTime start, SteadyTime end) {
  starts_.push_back(start);
  last_end_ = end;
}

}  // namespace tpud
