#include "daemon/tpu/wait_clock.h"

#include <algorithm>
#include <cstdio>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tpud {
namespace {

class SystemClock final : public WaitClock {
 public:
  SteadyTime Now() override { return std::chrono::steady_clock::now(); }
  absl::Status Sleep(std::chrono::nanoseconds duration, CancelToken* cancel) override;
};

// One Sleep's wake-up state; the token's waker points at it until removed.
struct Sleeper {
  absl::Mutex mu;
  bool woken ABSL_GUARDED_BY(mu) = false;
};

absl::Status SystemClock::Sleep(std::chrono::nanoseconds duration, CancelToken* cancel) {
  const SteadyTime until = Now() + duration;
  Sleeper sleeper;
  std::uint64_t waker = 0;
  if (cancel != nullptr) {
    waker = cancel->AddWaker([&sleeper] {
      absl::MutexLock lock(&sleeper.mu);
      sleeper.woken = true;
    });
    if (waker == 0) return absl::CancelledError("wait cancelled");
  }
  {
    absl::MutexLock lock(&sleeper.mu);
    sleeper.mu.AwaitWithTimeout(absl::Condition(&sleeper.woken), absl::FromChrono(until - Now()));
  }
  if (cancel != nullptr) cancel->RemoveWaker(waker);
  if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("wait cancelled");
  return absl::OkStatus();
}

}  // namespace

std::shared_ptr<WaitClock> SystemWaitClock() { return std::make_shared<SystemClock>(); }

std::chrono::nanoseconds Deadline::Remaining() const {
  return std::max(std::chrono::nanoseconds(0), end_ - clock_->Now());
}

absl::Status Deadline::SleepAtMost(std::chrono::nanoseconds duration, CancelToken* cancel) const {
  return clock_->Sleep(std::min(duration, Remaining()), cancel);
}


}  // namespace tpud
