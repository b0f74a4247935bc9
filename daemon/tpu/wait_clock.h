// Blocking, cancellable waits for TPU control, behind an interface so unit
// tests run on simulated time (tests/support/fake_wait_clock.h) instead of
// sleeping through a 30-minute reset.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "daemon/core/clock.h"
#include "daemon/core/durations.h"
#include "daemon/gce/http_client.h"

namespace tpud {

// The one token that cancels a TPU operation: it aborts an HTTP request in
// flight (HttpClient honours it), a gcloud run, and any WaitClock::Sleep.
using CancelToken = HttpCancel;

// Thread-safety: implementations are safe from any thread.
class WaitClock {
 public:
  virtual ~WaitClock() = default;
  // Monotonic now.
  virtual SteadyTime Now() = 0;
  // Blocks for `duration` (<= 0: returns at once). Cancelled as soon as
  // `cancel` (optional, not owned) is cancelled, also when it already was.
  virtual absl::Status Sleep(std::chrono::nanoseconds duration, CancelToken* cancel) = 0;
};

// std::chrono::steady_clock and a condition variable woken by the token.
std::shared_ptr<WaitClock> SystemWaitClock();

// A point in time by which a whole operation must finish, on a WaitClock
// (which must outlive it). Thread-safety: const methods from any thread.
class Deadline {
 public:
  Deadline(WaitClock& clock, Seconds timeout)
      : clock_(&clock), start_(clock.Now()), end_(start_ + ToDuration(timeout)) {}
  // Time left, never negative.
  std::chrono::nanoseconds Remaining() const;
  // Less than a millisecond left (the finest timeout libcurl takes).
  bool Expired() const { return Remaining() < std::chrono::milliseconds(1); }
  Seconds Elapsed() const { return clock_->Now() - start_; }
  SteadyTime start() const { return start_; }
  // Sleeps min(`duration`, Remaining()); Cancelled as WaitClock::Sleep.
  absl::Status SleepAtMost(std::chrono::nanoseconds duration, CancelToken* cancel) const;
  WaitClock& clock() const { return *clock_; }

  static std::chrono::nanoseconds ToDuration(Seconds s) { return ToNanos(s); }  // Saturating.

 private:
  WaitClock* clock_;
  SteadyTime start_;
  SteadyTime end_;
};


}  // namespace tpud
