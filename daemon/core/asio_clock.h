// Clock on a Boost.Asio io_context: real time, timers as asio steady_timers.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>

#include "daemon/core/clock.h"

namespace tpud {

// Thread-safety: as Clock; use only on the thread running `io`.
class AsioClock final : public Clock {
 public:
  explicit AsioClock(boost::asio::io_context& io) : io_(io) {}
  ~AsioClock() override;

  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  TimerId RunAfter(std::chrono::nanoseconds delay, std::function<void()> fn) override;
  void Cancel(TimerId id) override;

 private:
  boost::asio::io_context& io_;
  TimerId next_id_ = 1;
  std::map<TimerId, std::unique_ptr<boost::asio::steady_timer>> timers_;
};

}  // namespace tpud
