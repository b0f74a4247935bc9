// The Job's side of "never make things worse": transient launch errors retry
// instead of failing the job, lost log output is counted, and a restarted
// tpud carries a job on from where it was within its state (remaining
// backoff, start_seconds, the stop ladder's rung, an unfinished TPU reset).
#include <catch2/catch.hpp>
#include <csignal>

#include "tests/support/job_harness.h"

namespace tpud {
namespace {

using testing::Harness;

TEST_CASE("Job: a transient launch error backs off and retries, not counted, the job then runs", "[job][trust]") {
  Harness h;
  h.launcher.next_error = absl::UnavailableError("spawn \"/usr/bin/python3\": fork: Resource temporarily unavailable");
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->state() == JobState::kBackoff);
  const JobSnapshot waiting = h.job->Snapshot();
  CHECK_THAT(waiting.reason, Catch::Matchers::Contains("launch failed: spawn"));
  CHECK_THAT(waiting.reason, Catch::Matchers::Contains("transient; retry 1 in 1.0s, not counted"));
  CHECK(waiting.restarts == 0);
  CHECK(waiting.backoff_remaining.count() == Approx(1.0));
  h.clock.AdvanceSeconds(1.0);
  REQUIRE(h.launcher.launched.size() == 1);
  CHECK(h.job->state() == JobState::kStarting);
  CHECK(h.job->Snapshot().restarts == 0);
  CHECK(h.job->incidents().empty());  // Not a failure of the job.
}

TEST_CASE("Job: transient launch errors in a row back off longer each time", "[job][trust]") {
  Harness h;
  h.launcher.next_error = absl::ResourceExhaustedError("log /logs/digits.log: open: No space left on device");
  REQUIRE(h.job->Start("test").ok());
  h.launcher.next_error = absl::UnavailableError("spawn: pipe: Too many open files");
  h.clock.AdvanceSeconds(1.0);  // Retry 1 fails too: the next delay doubles.
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.job->Snapshot().backoff_remaining.count() == Approx(2.0));
  h.clock.AdvanceSeconds(2.0);
  CHECK(h.launcher.launched.size() == 1);
  CHECK(h.job->state() == JobState::kStarting);
}

TEST_CASE("Job: a permanent launch error (no such executable) fails the job at once", "[job][trust]") {
  Harness h;
  h.launcher.next_error = absl::NotFoundError("spawn \"/no/such\": No such file or directory");
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->state() == JobState::kFailed);
  CHECK_THAT(h.job->Snapshot().reason, Catch::Matchers::Contains("No such file or directory"));
  h.clock.AdvanceSeconds(100);
  CHECK(h.launcher.launched.empty());
}

TEST_CASE("Job: an unknown user fails the job, a known one reaches the launch spec", "[job][trust]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.user = "trainer";
  Harness h(spec);
  h.run_as = [](const std::string& user, const std::string&) -> absl::StatusOr<std::optional<RunAs>> {
    if (user != "trainer") return absl::NotFoundError("no such user \"" + user + "\"");
    return std::optional<RunAs>(RunAs{1000, 1000, {1000, 27}, "trainer", "/tmp"});
  };
  REQUIRE(h.job->Start("test").ok());
  REQUIRE(h.launcher.launched.size() == 1);
  const LaunchSpec& launched = h.launcher.last().spec;
  REQUIRE(launched.run_as.has_value());
  CHECK(launched.run_as->uid == 1000);
  CHECK(launched.working_dir == "/tmp");  // No working_dir: the user's home, not tpud's state dir.

  spec.user = "ghost";
  h.job->UpdateSpec(spec);
  h.launcher.Exit(1);
  h.clock.AdvanceSeconds(1.0);
  CHECK(h.job->state() == JobState::kFailed);
  CHECK_THAT(h.job->Snapshot().reason, Catch::Matchers::Contains("no such user \"ghost\""));
}

TEST_CASE("Job: log output lost to a full disk is counted across attempts", "[job][trust]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.launcher.last().observer->OnLogDropped(3304, true);
  CHECK(h.job->Snapshot().log_dropped_bytes == 3304);
  CHECK(h.job->Snapshot().log_dropping);
  h.launcher.last().observer->OnLogDropped(5000, false);
  CHECK_FALSE(h.job->Snapshot().log_dropping);
  h.launcher.Exit(1);
  h.clock.AdvanceSeconds(1.0);
  h.launcher.last().observer->OnLogDropped(10, true);
  CHECK(h.job->Snapshot().log_dropped_bytes == 5010);
}

// A Job that an earlier tpud left in `memory`, resumed with `adopted` (null: no attempt).
void RestoreAndResume(Harness& h, JobMemory memory, bool adopt) {
  h.job->Restore(std::move(memory));
  std::unique_ptr<Attempt> attempt;
  if (adopt) attempt = *h.launcher.Launch(LaunchSpec{}, h.job.get());
  h.job->Resume(std::move(attempt), 1);
}

TEST_CASE("Job restore: a backoff resumes with what was left of its delay, not a fresh one", "[job][trust]") {
  Harness h;
  JobMemory memory;
  memory.state = JobState::kBackoff;
  memory.attempt = 2;
  memory.restarts = 1;
  memory.backoff_until = h.clock.WallNow() + std::chrono::seconds(3);
  RestoreAndResume(h, memory, false);
  CHECK(h.job->state() == JobState::kBackoff);
  h.clock.AdvanceSeconds(2.9);
  CHECK(h.launcher.launched.empty());
  h.clock.AdvanceSeconds(0.2);
  REQUIRE(h.launcher.launched.size() == 1);
  CHECK(h.job->Snapshot().restarts == 1);
}

TEST_CASE("Job restore: an adopted starting attempt keeps what is left of start_seconds", "[job][trust]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.start_seconds = 10;
  Harness h(spec);
  JobMemory memory;
  memory.state = JobState::kStarting;
  memory.attempt = 1;
  memory.attempt_started = h.clock.WallNow() - std::chrono::seconds(7);
  RestoreAndResume(h, memory, true);
  CHECK(h.job->state() == JobState::kStarting);
  h.clock.AdvanceSeconds(2.9);
  CHECK(h.job->state() == JobState::kStarting);
  h.clock.AdvanceSeconds(0.2);
  CHECK(h.job->state() == JobState::kRunning);
}

TEST_CASE("Job restore: the stop ladder goes on from its rung when the next one is due", "[job][trust]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.stop.signals = {SIGINT, SIGTERM, SIGKILL};
  spec.stop.grace_seconds = 30;
  Harness h(spec);
  JobMemory memory;
  memory.state = JobState::kStopping;
  memory.attempt = 1;
  memory.stop_rung = 1;  // SIGINT and SIGTERM went out before tpud restarted...
  memory.stop_next_rung = h.clock.WallNow() + std::chrono::seconds(5);  // ...SIGKILL is due in 5 s.
  memory.stop_intent = "stop";
  RestoreAndResume(h, memory, true);
  CHECK(h.launcher.last().signals.empty());  // SIGINT is not sent again.
  h.clock.AdvanceSeconds(4.9);
  CHECK(h.launcher.last().signals.empty());
  h.clock.AdvanceSeconds(0.2);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGKILL});
  h.launcher.Kill(SIGKILL);
  CHECK(h.job->state() == JobState::kStopped);
}

TEST_CASE("Job restore: a TPU reset that was due and unfinished is redone before the restart", "[job][trust]") {
  Harness h(Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  JobMemory memory;
  memory.state = JobState::kBackoff;
  memory.attempt = 1;
  memory.last_exit = ExitStatus{1, 0, false, ""};
  memory.reset_pending = FailureClass::kDeadlineExceeded;
  Incident open;
  open.id = 1;
  open.job = "digits";
  open.attempt = 1;
  open.started = h.clock.WallNow();
  open.failure.failure_class = FailureClass::kDeadlineExceeded;
  open.failure.action = RecoveryAction::kResetAndRestart;
  memory.incidents.push_back(open);
  RestoreAndResume(h, memory, false);
  REQUIRE(h.resets.size() == 1);  // No restart on an unreset TPU because tpud restarted.
  CHECK(h.resets[0].first.failure_class == FailureClass::kDeadlineExceeded);
  CHECK(h.job->Snapshot().reset_pending == FailureClass::kDeadlineExceeded);
  h.clock.AdvanceSeconds(60);
  CHECK(h.launcher.launched.empty());
  h.resets[0].second(TpuResetResult{true, "api", Seconds(40), absl::OkStatus()});
  CHECK_FALSE(h.job->Snapshot().reset_pending.has_value());
  h.clock.AdvanceSeconds(1.0);
  REQUIRE(h.launcher.launched.size() == 1);
  CHECK(h.job->incidents().back().reset_result == "ok");
}

TEST_CASE("Job: the snapshot says where within its state the job is, for the state store", "[job][trust]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(2);
  REQUIRE(h.job->Stop("test").ok());
  JobSnapshot s = h.job->Snapshot();
  CHECK(s.stop_intent == "stop");
  CHECK(s.stop_rung == 0);
  REQUIRE(s.stop_next_rung.has_value());
  CHECK(*s.stop_next_rung - h.clock.WallNow() == std::chrono::seconds(10));
  REQUIRE(s.attempt_started.has_value());
  CHECK(h.clock.WallNow() - *s.attempt_started == std::chrono::seconds(2));
}

}  // namespace
}  // namespace tpud
