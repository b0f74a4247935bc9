// Simulated time for unit tests: time moves only when the test advances it.
#pragma once

#include <map>
#include <utility>

#include "daemon/core/clock.h"

namespace tpud::testing {

class FakeClock final : public Clock {
 public:
  SteadyTime Now() const override { return now_; }
  WallTime WallNow() const override { return wall_start_ + (now_ - SteadyTime{}); }

  TimerId RunAfter(std::chrono::nanoseconds delay, std::function<void()> fn) override {
    const TimerId id = next_id_++;
    timers_.emplace(std::make_pair(now_ + std::max(delay, std::chrono::nanoseconds(0)), id), std::move(fn));
    return id;
  }
  void Cancel(TimerId id) override {
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->first.second == id) {
        timers_.erase(it);
        return;
      }
    }
  }

  // Moves time forward by `d`, firing due timers in deadline order.
  void Advance(std::chrono::nanoseconds d) {
    const SteadyTime end = now_ + d;
    while (!timers_.empty() && timers_.begin()->first.first <= end) {
      auto node = timers_.extract(timers_.begin());
      now_ = node.key().first;
      node.mapped()();
    }
    now_ = end;
  }
  void AdvanceSeconds(double s) {
    Advance(std::chrono::duration_cast<std::chrono::nanoseconds>(Seconds(s)));
  }
  // Seconds until the next timer fires; negative when none is pending.
  double NextTimerInSeconds() const {
    if (timers_.empty()) return -1;
    return Seconds(timers_.begin()->first.first - now_).count();
  }
  std::size_t pending_timers() const { return timers_.size(); }

 private:
  SteadyTime now_{};
  WallTime wall_start_ = WallTime(std::chrono::seconds(1'700'000'000));
  TimerId next_id_ = 1;
  std::map<std::pair<SteadyTime, TimerId>, std::function<void()>> timers_;
};

}  // namespace tpud::testing
