// Goodput accounting on simulated time: where a job's wall time went.
#include "daemon/supervisor/goodput.h"

#include <catch2/catch.hpp>

namespace tpud {
namespace {

const SteadyTime kT0 = SteadyTime{} + std::chrono::hours(1);

SteadyTime At(double seconds) {
  return kT0 + std::chrono::duration_cast<SteadyTime::duration>(Seconds(seconds));
}

double Badput(const GoodputFigures& f, BadputCause cause) { return f.badput_of(cause).count(); }

// Progress lines every 10 s: step s at time `start` + (s - first_step).
void Progress(GoodputLedger& ledger, double start, int first_step, int last_step) {
  for (int step = first_step; step <= last_step; step += 10) {
    ledger.OnProgress(At(start + step - first_step), step);
  }
}

TEST_CASE("Goodput: a crash wastes the progress after the checkpoint the next attempt resumes from",
          "[goodput]") {
  GoodputLedger ledger;
  ledger.OnAttemptStart(At(0), std::nullopt);
  Progress(ledger, 10, 10, 100);  // Steps 10..100 at t=10..100.
  ledger.OnAttemptEnd(At(105), AttemptEnd::kOther);
  // Until the next attempt starts, its progress still counts as kept.
  GoodputFigures pending = ledger.Figures(At(107));
  CHECK(pending.productive.count() == Approx(95));
  CHECK(Badput(pending, BadputCause::kRecovery) == Approx(2));

  ledger.OnAttemptStart(At(110), 50);  // Resumes from ckpt 50, reached at t=50.
  ledger.OnRestoreBegin(At(113));
  ledger.OnProgress(At(118), 60);
  ledger.OnProgress(At(200), 150);
  ledger.OnAttemptEnd(At(210), AttemptEnd::kSucceeded);
  ledger.OnIdle(At(210));

  const GoodputFigures f = ledger.Figures(At(500));  // Stopped time does not count.
  CHECK(f.productive.count() == Approx(40 + 92));
  CHECK(Badput(f, BadputCause::kStartup) == Approx(10 + 3));
  CHECK(Badput(f, BadputCause::kCheckpointRestore) == Approx(5));
  CHECK(Badput(f, BadputCause::kWastedProgress) == Approx(55));
  CHECK(Badput(f, BadputCause::kRecovery) == Approx(5));
  CHECK(Badput(f, BadputCause::kHangDetection) == Approx(0));
  CHECK(f.wall().count() == Approx(210));
  REQUIRE(f.ratio().has_value());
  CHECK(*f.ratio() == Approx(132.0 / 210.0));
}

TEST_CASE("Goodput: a hang's silence is hang detection, the redone steps before it wasted progress",
          "[goodput]") {
  GoodputLedger ledger;
  ledger.OnAttemptStart(At(0), std::nullopt);
  Progress(ledger, 10, 10, 50);  // Last progress: step 50 at t=50.
  ledger.OnAttemptEnd(At(80), AttemptEnd::kHung);
  ledger.OnAttemptStart(At(81), 40);
  const GoodputFigures f = ledger.Figures(At(81));
  CHECK(Badput(f, BadputCause::kHangDetection) == Approx(30));
  CHECK(f.productive.count() == Approx(30));  // t=10 -> t=40, where step 40 was reached.
  CHECK(Badput(f, BadputCause::kWastedProgress) == Approx(10));
  CHECK(Badput(f, BadputCause::kRecovery) == Approx(1));
  CHECK(Badput(f, BadputCause::kStartup) == Approx(10));
}

TEST_CASE("Goodput: restarting from scratch wastes all progress, a newer checkpoint none of it",
          "[goodput]") {
  GoodputLedger scratch;
  scratch.OnAttemptStart(At(0), std::nullopt);
  Progress(scratch, 10, 10, 100);
  scratch.OnAttemptEnd(At(100), AttemptEnd::kOther);
  scratch.OnAttemptStart(At(100), std::nullopt);
  CHECK(scratch.Figures(At(100)).productive.count() == Approx(0));
  CHECK(Badput(scratch.Figures(At(100)), BadputCause::kWastedProgress) == Approx(90));

  GoodputLedger saved;  // E.g. saved on SIGTERM at its last step.
  saved.OnAttemptStart(At(0), std::nullopt);
  Progress(saved, 10, 10, 100);
  saved.OnAttemptEnd(At(100), AttemptEnd::kOther);
  saved.OnAttemptStart(At(100), 100);
  CHECK(saved.Figures(At(100)).productive.count() == Approx(90));
  CHECK(Badput(saved.Figures(At(100)), BadputCause::kWastedProgress) == Approx(0));
}

TEST_CASE("Goodput: a running attempt counts startup, then progress, as it happens", "[goodput]") {
  GoodputLedger ledger;
  CHECK_FALSE(ledger.Figures(At(0)).ratio().has_value());
  ledger.OnAttemptStart(At(0), std::nullopt);
  CHECK(Badput(ledger.Figures(At(4)), BadputCause::kStartup) == Approx(4));
  CHECK(*ledger.Figures(At(4)).ratio() == Approx(0));
  ledger.OnProgress(At(5), std::nullopt);
  const GoodputFigures f = ledger.Figures(At(25));
  CHECK(f.productive.count() == Approx(20));
  CHECK(*f.ratio() == Approx(0.8));
}

TEST_CASE("Goodput: without steps, what followed the last progress line is wasted", "[goodput]") {
  GoodputLedger ledger;
  ledger.OnAttemptStart(At(0), std::nullopt);
  ledger.OnProgress(At(10), std::nullopt);
  ledger.OnProgress(At(50), std::nullopt);
  ledger.OnAttemptEnd(At(60), AttemptEnd::kOther);
  ledger.OnAttemptStart(At(62), 1234);
  const GoodputFigures f = ledger.Figures(At(62));
  CHECK(f.productive.count() == Approx(40));
  CHECK(Badput(f, BadputCause::kWastedProgress) == Approx(10));
}

TEST_CASE("Goodput: time stopped by a person is not wall time, backoff before the stop is recovery",
          "[goodput]") {
  GoodputLedger ledger;
  ledger.OnAttemptStart(At(0), std::nullopt);
  ledger.OnProgress(At(10), 10);
  ledger.OnAttemptEnd(At(20), AttemptEnd::kOther);  // Fails; backoff...
  ledger.OnIdle(At(26));                             // ...then stopped during the backoff.
  ledger.OnAttemptStart(At(1000), 10);
  const GoodputFigures f = ledger.Figures(At(1000));
  CHECK(Badput(f, BadputCause::kRecovery) == Approx(6));
  CHECK(f.wall().count() == Approx(26));
}

// Steps 1..20000, one a second from t=1, then a crash at t=20000; the next
// attempt resumes from `resume`. Returns the productive seconds.
double ProductiveAfterLongAttempt(std::int64_t resume) {
  GoodputLedger ledger;
  ledger.OnAttemptStart(At(0), std::nullopt);
  for (int step = 1; step <= 20000; ++step) ledger.OnProgress(At(step), step);
  ledger.OnAttemptEnd(At(20000), AttemptEnd::kOther);
  ledger.OnAttemptStart(At(20000), resume);
  const GoodputFigures f = ledger.Figures(At(20000));
  CHECK(f.productive.count() + Badput(f, BadputCause::kWastedProgress) == Approx(19999));
  return f.productive.count();
}

TEST_CASE("Goodput: a long attempt keeps bounded samples, exact for recent steps", "[goodput]") {
  // Step s was reached at t=s, so productive time is s - 1 (from the first step, t=1).
  CHECK(ProductiveAfterLongAttempt(19900) == Approx(19899));  // Within the newest samples: exact.
  const double older = ProductiveAfterLongAttempt(15000);     // Far back: thinned, a bit late.
  CHECK(older >= 14999);
  CHECK(older <= 14999 + 200);  // Within 1 % of the attempt.
}

}  // namespace
}  // namespace tpud
