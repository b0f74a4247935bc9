// Incident bundles from the Job's side: a hang's bundle is captured before
// the first stop signal and never holds the ladder past capture_seconds; a
// failed attempt gets one after its exit; a preemption gets none. On a fake
// launcher and simulated time.
#include <catch2/catch.hpp>
#include <csignal>

#include "tests/support/job_harness.h"

namespace tpud {
namespace {

using testing::Harness;

JobSpec Hanging() {
  JobSpec spec = Harness::DefaultSpec();
  spec.progress.configured = true;
  spec.progress.regex = R"(step=(\d+))";
  spec.progress.startup_grace_seconds = 30;
  spec.progress.timeout_seconds = 10;
  spec.stop.signals = {SIGINT, SIGKILL};
  return spec;
}

TEST_CASE("Job bundles: a hang is captured before the first stop signal, which follows once it is written",
          "[job][bundle]") {
  Harness h(Hanging(), false, /*with_bundles=*/true);
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("step=3");
  h.clock.AdvanceSeconds(10);  // No progress for the timeout: a hang.
  REQUIRE(h.captures.size() == 1);
  const incident::CaptureRequest& request = h.captures[0].first;
  CHECK(request.trigger == "hang");
  CHECK(request.job == "digits");
  CHECK(request.number == 1);
  CHECK(request.attempt == 1);
  CHECK(request.pid == 1001);  // The fake launcher's first pid.
  CHECK(request.failure_class == "hang");
  CHECK(request.reason.find("no progress for 10.0s") != std::string::npos);
  CHECK(request.log_path == std::filesystem::path("/logs/digits.log"));
  CHECK(request.env.count("TPUD_ATTEMPT") == 1);
  // The evidence is still there: no signal yet, still running.
  CHECK(h.launcher.last().signals.empty());
  CHECK(h.job->state() == JobState::kRunning);
  h.clock.AdvanceSeconds(3);
  CHECK(h.launcher.last().signals.empty());
  h.captures[0].second();  // Written.
  CHECK(h.job->state() == JobState::kStopping);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGINT});
  h.launcher.Exit(130);
  // The hang's incident has its bundle already: the exit takes no second one.
  CHECK(h.captures.size() == 1);
  CHECK(h.job->Snapshot().last_incident->id == 1);
  CHECK(h.job->Snapshot().last_incident->failure.failure_class == FailureClass::kHang);
}

TEST_CASE("Job bundles: a capture that never finishes holds the ladder for capture_seconds at most",
          "[job][bundle]") {
  Harness h(Hanging(), false, true);
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(30);  // Startup grace over without progress.
  REQUIRE(h.captures.size() == 1);
  h.clock.AdvanceSeconds(9.9);
  CHECK(h.launcher.last().signals.empty());
  h.clock.AdvanceSeconds(0.1);
  CHECK(h.job->state() == JobState::kStopping);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGINT});
  h.captures[0].second();  // Late: changes nothing.
  CHECK(h.launcher.last().signals == std::vector<int>{SIGINT});
}

TEST_CASE("Job bundles: an attempt that exits during its hang capture is judged by its exit", "[job][bundle]") {
  Harness h(Hanging(), false, true);
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(30);
  REQUIRE(h.captures.size() == 1);
  h.launcher.Print("F0000 00:00:1717141650.893 1 check.cc:10] Check failed: ok");
  h.launcher.Kill(SIGABRT);
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.job->Snapshot().last_incident->failure.failure_class == FailureClass::kCrash);
  CHECK(h.launcher.last().signals.empty());
  // The exit gets its own bundle with its verdict, for the same incident
  // (the capturer keeps the hang's beside it).
  REQUIRE(h.captures.size() == 2);
  CHECK(h.captures[1].first.trigger == "exit");
  CHECK(h.captures[1].first.number == 1);
  CHECK(h.captures[1].first.failure_class == "crash");
  h.captures[0].second();  // The hang capture ends after the exit: no hang, no signal.
  CHECK(h.job->state() == JobState::kBackoff);
  h.clock.AdvanceSeconds(11);
  CHECK(h.launcher.launched.size() == 2);
  CHECK(h.launcher.launched[0]->signals.empty());
}

TEST_CASE("Job bundles: a crash gets an exit bundle with its verdict, a stop and a preemption get none",
          "[job][bundle]") {
  Harness h(Harness::DefaultSpec(), false, true);
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("F0000 00:00:1717141650.893 1 check.cc:10] Check failed: ok");
  h.launcher.Kill(SIGABRT);
  REQUIRE(h.captures.size() == 1);
  const incident::CaptureRequest& request = h.captures[0].first;
  CHECK(request.trigger == "exit");
  CHECK(request.pid == 0);
  CHECK(request.number == 1);
  CHECK(request.failure_class == "crash");
  CHECK(request.deciding_line.find("Check failed") != std::string::npos);
  CHECK(request.reason.find("SIGABRT") != std::string::npos);

  h.clock.AdvanceSeconds(1);  // Attempt 2 runs; a person's stop is no incident.
  REQUIRE(h.launcher.launched.size() == 2);
  REQUIRE(h.job->Stop("test").ok());
  h.launcher.Exit(143);
  CHECK(h.captures.size() == 1);

  REQUIRE(h.job->Start("test").ok());  // Attempt 3 is preempted: nothing is wrong with it.
  h.job->OnMaintenanceNotice("preempted");
  h.launcher.Exit(0);
  CHECK(h.captures.size() == 1);
}

TEST_CASE("Job bundles: a Job removed while its hang is captured ignores the late callback", "[job][bundle]") {
  Harness h(Hanging(), false, true);
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(30);
  REQUIRE(h.captures.size() == 1);
  std::function<void()> done = h.captures[0].second;
  h.job.reset();
  done();  // Must not touch the destroyed Job (ASan would say so).
  SUCCEED();
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Job bundles: a person's stop overtakes a hang capture, and the next failure gets its own bundle",
          "[job][bundle]") {
  testing::Harness h(Hanging(), false, true);
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(30);
  REQUIRE(h.captures.size() == 1);
  REQUIRE(h.job->Stop("by hand").ok());  // The person's stop wins; the hang is never declared.
  CHECK(h.launcher.last().signals == std::vector<int>{SIGINT});
  h.launcher.Exit(130);
  h.captures[0].second();
  CHECK(h.job->state() == JobState::kStopped);
  CHECK_FALSE(h.job->Snapshot().last_incident.has_value());

  REQUIRE(h.job->Start("test").ok());
  h.launcher.Kill(SIGSEGV);
  REQUIRE(h.captures.size() == 2);
  CHECK(h.captures[1].first.number == 1);  // The number the overtaken capture had used...
  CHECK(h.captures[1].first.trigger == "exit");  // ...now this crash's bundle.
  CHECK(h.captures[1].first.attempt == 2);
}

}  // namespace
}  // namespace tpud
