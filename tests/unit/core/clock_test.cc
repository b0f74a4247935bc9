// Timers on the real (asio) and the simulated clock: a cancelled timer never
// fires, even when its deadline has already passed (issue: a stop that did
// not stick because a cancelled backoff timer still started the job).
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "daemon/core/asio_clock.h"
#include "tests/support/fake_clock.h"

namespace tpud {
namespace {

using std::chrono::milliseconds;

// Two timers due at the same moment; the first one's callback cancels the
// second, as Job::TransitionTo cancels the state's timer.
template <typename RunUntilIdle>
std::vector<int> FireTwoWhereFirstCancelsSecond(Clock& clock, RunUntilIdle run) {
  std::vector<int> fired;
  Clock::TimerId second = 0;
  clock.RunAfter(milliseconds(0), [&] {
    fired.push_back(1);
    clock.Cancel(second);
  });
  second = clock.RunAfter(milliseconds(0), [&] { fired.push_back(2); });
  run();
  return fired;
}

TEST_CASE("AsioClock: a timer cancelled after its deadline passed never fires", "[clock]") {
  boost::asio::io_context io;
  AsioClock clock(io);
  const std::vector<int> fired = FireTwoWhereFirstCancelsSecond(clock, [&] { io.run(); });
  CHECK(fired == std::vector<int>{1});
}

TEST_CASE("AsioClock: 1000 expired-then-cancelled timers, none fires", "[clock]") {
  boost::asio::io_context io;
  AsioClock clock(io);
  int fired = 0;
  std::vector<Clock::TimerId> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(clock.RunAfter(milliseconds(0), [&] { ++fired; }));
  io.poll();  // Nothing runs before the handlers are dispatched...
  // ...so run one turn in which the first handler cancels all the others.
  fired = 0;
  std::vector<Clock::TimerId> more;
  clock.RunAfter(milliseconds(0), [&] {
    for (Clock::TimerId id : more) clock.Cancel(id);
  });
  for (int i = 0; i < 1000; ++i) more.push_back(clock.RunAfter(milliseconds(0), [&] { ++fired; }));
  io.restart();
  io.run();
  CHECK(fired == 0);
}

TEST_CASE("AsioClock: an uncancelled timer fires once, after its delay", "[clock]") {
  boost::asio::io_context io;
  AsioClock clock(io);
  int fired = 0;
  const SteadyTime start = clock.Now();
  clock.RunAfter(milliseconds(20), [&] { ++fired; });
  io.run();
  CHECK(fired == 1);
  CHECK(clock.Now() - start >= milliseconds(20));
}

TEST_CASE("FakeClock: a timer cancelled by a timer due at the same moment never fires", "[clock]") {
  testing::FakeClock clock;
  const std::vector<int> fired =
      FireTwoWhereFirstCancelsSecond(clock, [&] { clock.AdvanceSeconds(1); });
  CHECK(fired == std::vector<int>{1});
  CHECK(clock.pending_timers() == 0);
}

}  // namespace
}  // namespace tpud
