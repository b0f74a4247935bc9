// Time and timers, behind an interface so the supervisor runs on simulated time in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace tpud {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Seconds = std::chrono::duration<double>;

// The supervisor's notion of "now" plus one-shot timers on its event loop.
//
// Thread-safety: implementations are used only from the thread that runs the
// supervisor's event loop; timer callbacks run on that thread too.
class Clock {
 public:
  using TimerId = std::uint64_t;

  virtual ~Clock() = default;

  // Monotonic time, for durations (uptime, backoff, deadlines).
  virtual SteadyTime Now() const = 0;
  // Wall-clock time, for what people read (event timestamps).
  virtual WallTime WallNow() const = 0;

  // Runs `fn` once, `delay` from now (a zero or negative delay runs it on the
  // next turn of the loop, never inline). Returns an id for Cancel; never 0.
  virtual TimerId RunAfter(std::chrono::nanoseconds delay, std::function<void()> fn) = 0;
  // Cancels a pending timer: once Cancel returns, its callback never runs,
  // even if its deadline had already passed. A no-op for 0, a fired or an
  // unknown id.
  virtual void Cancel(TimerId id) = 0;
};

// Milliseconds since the Unix epoch, as the API and events report time.
std::int64_t ToUnixMillis(WallTime t);

}  // namespace tpud
