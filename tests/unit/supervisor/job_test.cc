// The job state machine on a fake launcher and simulated time.
#include <catch2/catch.hpp>
#include <csignal>

#include "daemon/core/backoff.h"
#include "tests/support/job_harness.h"

namespace tpud {
namespace {

using testing::Harness;

TEST_CASE("Job: start launches an attempt, STOPPED -> STARTING -> RUNNING after start_seconds", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->state() == JobState::kStarting);
  REQUIRE(h.launcher.launched.size() == 1);
  const LaunchSpec& spec = h.launcher.last().spec;
  CHECK(spec.argv == std::vector<std::string>{"/usr/bin/python3", "train.py"});
  CHECK(spec.env.at("TPUD_JOB") == "digits");
  CHECK(spec.env.at("TPUD_ATTEMPT") == "1");
  CHECK(spec.env.at("TPUD_CHECKPOINT").empty());
  CHECK(spec.env.at("TPUD_CHECKPOINT_STEP").empty());
  CHECK(spec.working_dir == "/state");
  CHECK(spec.log_path == "/logs/digits.log");
  h.clock.AdvanceSeconds(0.9);
  CHECK(h.job->state() == JobState::kStarting);
  h.clock.AdvanceSeconds(0.2);
  CHECK(h.job->state() == JobState::kRunning);
  CHECK(h.listener.States() == std::vector<JobState>{JobState::kStarting, JobState::kRunning});
}

TEST_CASE("Job: exit 0 ends as SUCCEEDED without a restart", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(5);
  h.launcher.Exit(0);
  CHECK(h.job->state() == JobState::kSucceeded);
  h.clock.AdvanceSeconds(1000);
  CHECK(h.launcher.launched.size() == 1);
  CHECK(h.job->Snapshot().last_exit->code == 0);
}

TEST_CASE("Job: a failure restarts from the newest checkpoint with resume args and env", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(5);
  h.checkpoint = CheckpointRef{"/ckpt/ckpt-300.pt", 300};
  h.launcher.Kill(SIGKILL);
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.job->Snapshot().last_exit->signal == SIGKILL);
  h.clock.AdvanceSeconds(1.0);
  REQUIRE(h.launcher.launched.size() == 2);
  const LaunchSpec& spec = h.launcher.last().spec;
  CHECK(spec.argv == std::vector<std::string>{"/usr/bin/python3", "train.py", "--resume-from",
                                              "/ckpt/ckpt-300.pt", "--step=300"});
  CHECK(spec.env.at("TPUD_ATTEMPT") == "2");
  CHECK(spec.env.at("TPUD_CHECKPOINT") == "/ckpt/ckpt-300.pt");
  CHECK(spec.env.at("TPUD_CHECKPOINT_STEP") == "300");
  const JobEvent& starting = h.listener.events.back();
  CHECK(starting.to == JobState::kStarting);
  REQUIRE(starting.checkpoint.has_value());
  CHECK(starting.checkpoint->step == 300);
}

TEST_CASE("Job: backoff doubles per restart and is capped", "[job][backoff]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  std::vector<double> delays;
  for (int i = 0; i < 3; ++i) {
    h.launcher.Exit(1);
    REQUIRE(h.job->state() == JobState::kBackoff);
    delays.push_back(h.clock.NextTimerInSeconds());
    h.clock.AdvanceSeconds(delays.back());
    REQUIRE(h.job->state() == JobState::kStarting);
  }
  CHECK(delays == std::vector<double>{1, 2, 4});
  RestartPolicy policy;
  policy.backoff_initial_seconds = 1;
  policy.backoff_max_seconds = 5;
  policy.backoff_jitter = 0;
  CHECK(BackoffDelay(policy, 4, 0).count() == 5);
  CHECK(BackoffDelay(policy, 60, 0).count() == 5);
}

TEST_CASE("Backoff: jitter only shortens the delay, within the jitter fraction", "[backoff]") {
  RestartPolicy policy;
  policy.backoff_initial_seconds = 10;
  policy.backoff_max_seconds = 300;
  policy.backoff_jitter = 0.2;
  CHECK(BackoffDelay(policy, 1, 0.0).count() == Approx(10));
  CHECK(BackoffDelay(policy, 1, 0.5).count() == Approx(9));
  CHECK(BackoffDelay(policy, 1, 0.999).count() == Approx(8.002));
  CHECK(BackoffDelay(policy, 10, 0.5).count() == Approx(270));
}

TEST_CASE("Job: BACKOFF -> FAILED when max_restarts is exhausted", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  for (int i = 0; i < 3; ++i) {
    h.launcher.Exit(7);
    REQUIRE(h.job->state() == JobState::kBackoff);
    h.clock.AdvanceSeconds(10);
  }
  h.launcher.Exit(7);
  CHECK(h.job->state() == JobState::kFailed);
  CHECK(h.launcher.launched.size() == 4);
  const JobSnapshot s = h.job->Snapshot();
  CHECK(s.restarts == 3);
  CHECK(s.reason.find("gave up after 3 restarts") != std::string::npos);
  CHECK(s.reason.find("exit code 7") != std::string::npos);
  CHECK(s.restarts_by_reason.at("unknown") == 3);  // An exit code alone classifies as unknown.
  h.clock.AdvanceSeconds(1000);
  CHECK(h.launcher.launched.size() == 4);
}

TEST_CASE("Job: an attempt up for reset_after_seconds gets a fresh restart budget", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  for (int i = 0; i < 3; ++i) {
    h.launcher.Exit(1);
    h.clock.AdvanceSeconds(10);
  }
  REQUIRE(h.job->Snapshot().restarts == 3);
  h.clock.AdvanceSeconds(100);  // This attempt is healthy for reset_after_seconds.
  h.launcher.Exit(1);
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.job->Snapshot().restarts == 1);
  CHECK(h.clock.NextTimerInSeconds() == 1);  // Backoff starts over as well.
}

TEST_CASE("Job: stop walks the signal ladder with grace_seconds between rungs", "[job][stop]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(2);
  REQUIRE(h.job->Stop("test").ok());
  CHECK(h.job->state() == JobState::kStopping);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGTERM});
  h.clock.AdvanceSeconds(9.9);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGTERM});
  h.clock.AdvanceSeconds(0.2);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGTERM, SIGKILL});
  h.launcher.Kill(SIGKILL);
  CHECK(h.job->state() == JobState::kStopped);
  h.clock.AdvanceSeconds(1000);
  CHECK(h.launcher.launched.size() == 1);  // A stopped job is not restarted.
}

TEST_CASE("Job: an exit during the ladder cancels the remaining rungs", "[job][stop]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  REQUIRE(h.job->Stop("test").ok());
  h.launcher.Exit(143);
  CHECK(h.job->state() == JobState::kStopped);
  CHECK(h.clock.pending_timers() == 0);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGTERM});
}

TEST_CASE("Job: stop in BACKOFF cancels the restart", "[job][stop]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Exit(1);
  REQUIRE(h.job->state() == JobState::kBackoff);
  REQUIRE(h.job->Stop("test").ok());
  CHECK(h.job->state() == JobState::kStopped);
  h.clock.AdvanceSeconds(100);
  CHECK(h.launcher.launched.size() == 1);
}

TEST_CASE("Job: restart of a running job stops it, then starts a new attempt", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(2);
  REQUIRE(h.job->Restart("test").ok());
  CHECK(h.job->state() == JobState::kStopping);
  h.launcher.Exit(143);
  CHECK(h.job->state() == JobState::kStarting);
  CHECK(h.launcher.launched.size() == 2);
  CHECK(h.listener.States() == std::vector<JobState>{JobState::kStarting, JobState::kRunning,
                                                     JobState::kStopping, JobState::kStopped,
                                                     JobState::kStarting});
}

TEST_CASE("Job: start of an active job is refused, restart from FAILED starts afresh", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->Start("again").code() == absl::StatusCode::kFailedPrecondition);
  for (int i = 0; i < 4; ++i) {
    h.launcher.Exit(1);
    h.clock.AdvanceSeconds(10);
  }
  REQUIRE(h.job->state() == JobState::kFailed);
  REQUIRE(h.job->Start("again").ok());
  CHECK(h.job->state() == JobState::kStarting);
  CHECK(h.job->Snapshot().restarts == 0);
}

TEST_CASE("Job: a spawn error fails the job at once with the reason", "[job]") {
  Harness h;
  h.launcher.next_error = absl::NotFoundError("spawn \"/nope\": No such file or directory");
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->state() == JobState::kFailed);
  CHECK(h.job->Snapshot().reason.find("/nope") != std::string::npos);
  CHECK(h.listener.States() == std::vector<JobState>{JobState::kStarting, JobState::kFailed});
}

TEST_CASE("Job: a checkpoint lookup error is a counted failure, not a fresh start", "[job]") {
  Harness h;
  h.checkpoint_error = absl::PermissionDeniedError("/ckpt: Permission denied");
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.job->Snapshot().reason.find("Permission denied") != std::string::npos);
  CHECK(h.launcher.launched.empty());
  h.checkpoint_error = absl::OkStatus();
  h.clock.AdvanceSeconds(1);
  CHECK(h.job->state() == JobState::kStarting);
  CHECK(h.launcher.launched.size() == 1);
}

TEST_CASE("Job: every transition emits exactly one event, and only allowed ones happen", "[job]") {
  Harness h;
  REQUIRE(h.job->Start("a").ok());
  h.clock.AdvanceSeconds(2);
  h.launcher.Exit(1);
  h.clock.AdvanceSeconds(1);
  REQUIRE(h.job->Stop("b").ok());
  h.launcher.Exit(143);
  JobState previous = JobState::kStopped;
  for (const JobEvent& e : h.listener.events) {
    CHECK(e.from == previous);
    CHECK(IsAllowedTransition(e.from, e.to));
    previous = e.to;
  }
  CHECK(h.listener.events.size() == 6);
}

TEST_CASE("Job state table: forbidden transitions are refused", "[job]") {
  CHECK_FALSE(IsAllowedTransition(JobState::kStopped, JobState::kRunning));
  CHECK_FALSE(IsAllowedTransition(JobState::kStopping, JobState::kStarting));
  CHECK(IsAllowedTransition(JobState::kStopping, JobState::kBackoff));  // tpud stopped a hung attempt.
  CHECK_FALSE(IsAllowedTransition(JobState::kSucceeded, JobState::kFailed));
  CHECK(IsAllowedTransition(JobState::kBackoff, JobState::kStarting));
  CHECK(JobStateName(JobState::kBackoff) == std::string("backoff"));
}

}  // namespace
}  // namespace tpud
