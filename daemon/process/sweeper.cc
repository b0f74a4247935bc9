#include "daemon/process/sweeper.h"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>

namespace tpud {
namespace {

using std::chrono::milliseconds;

class Sweep : public std::enable_shared_from_this<Sweep> {
 public:
  Sweep(boost::asio::io_context& io, std::string what, SweepStep step, std::function<void()> done)
      : timer_(io), what_(std::move(what)), step_(std::move(step)), done_(std::move(done)),
        started_(std::chrono::steady_clock::now()), next_warning_(started_ + std::chrono::seconds(10)) {}

  void Again() {
    timer_.expires_after(delay_);
    delay_ = std::min(delay_ * 2, milliseconds(100));
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      if (self->step_()) return self->done_();
      self->Warn();
      self->Again();
    });
  }

 private:
  void Warn() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_warning_) return;
    next_warning_ = now + std::chrono::seconds(10);
    spdlog::warn("{}: processes still alive {:.0f}s after SIGKILL; waiting for them to exit before going on",
                 what_, std::chrono::duration<double>(now - started_).count());
  }

  boost::asio::steady_timer timer_;
  std::string what_;
  SweepStep step_;
  std::function<void()> done_;
  milliseconds delay_{10};
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point next_warning_;
};

}  // namespace

void SweepUntilGone(boost::asio::io_context& io, std::string what, SweepStep step, std::function<void()> done) {
  if (step()) return done();
  std::make_shared<Sweep>(io, std::move(what), std::move(step), std::move(done))->Again();
}

}  // namespace tpud
