#include "daemon/core/asio_clock.h"

namespace tpud {

std::int64_t ToUnixMillis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

AsioClock::~AsioClock() {
  for (auto& [id, timer] : timers_) timer->cancel();
}

Clock::TimerId AsioClock::RunAfter(std::chrono::nanoseconds delay, std::function<void()> fn) {
  const TimerId id = next_id_++;
  auto timer = std::make_unique<boost::asio::steady_timer>(io_);
  timer->expires_after(std::max(delay, std::chrono::nanoseconds(0)));
  timer->async_wait([this, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    // A timer that had already expired when Cancel() ran completes with
    // success: its handler was queued before the cancel could reach it
    // (asio's basic_waitable_timer::cancel). Cancel() erased its id, which is
    // the only record that counts: no entry, no call.
    if (ec) return;  // Cancelled, or the clock is gone: touch nothing.
    auto it = timers_.find(id);
    if (it == timers_.end()) return;
    timers_.erase(it);
    fn();
  });
  timers_.emplace(id, std::move(timer));
  return id;
}

void AsioClock::Cancel(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  it->second->cancel();
  timers_.erase(it);
}

}  // namespace tpud
