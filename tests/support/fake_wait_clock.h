// Simulated time for blocking waits: Sleep returns at once, moving time
// forward by the requested duration, so a 30-minute reset runs in microseconds.
#pragma once

#include <chrono>
#include <mutex>
#include <vector>

#include "daemon/tpu/wait_clock.h"

namespace tpud::testing {

// Thread-safety: safe from any thread.
class FakeWaitClock final : public WaitClock {
 public:
  SteadyTime Now() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  absl::Status Sleep(std::chrono::nanoseconds duration, CancelToken* cancel) override {
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("wait cancelled");
    std::lock_guard<std::mutex> lock(mu_);
    sleeps_.push_back(Seconds(duration).count());
    if (duration.count() > 0) now_ += duration;
    return absl::OkStatus();
  }
  void AdvanceSeconds(double s) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Seconds(s));
  }
  // Every Sleep's duration in seconds, in order.
  std::vector<double> sleeps() {
    std::lock_guard<std::mutex> lock(mu_);
    return sleeps_;
  }

 private:
  std::mutex mu_;
  SteadyTime now_{};
  std::vector<double> sleeps_;
};

}  // namespace tpud::testing
