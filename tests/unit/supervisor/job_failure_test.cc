// Failure classification, hang detection, restart budgets and maintenance
// events in the job state machine, on a fake launcher and simulated time.
#include <catch2/catch.hpp>
#include <csignal>

#include "tests/support/job_harness.h"

namespace tpud {
namespace {

using testing::Harness;

JobSpec WithProgress(double grace, double timeout) {
  JobSpec spec = Harness::DefaultSpec();
  spec.progress.configured = true;
  spec.progress.regex = R"(step=(\d+))";
  spec.progress.startup_grace_seconds = grace;
  spec.progress.timeout_seconds = timeout;
  return spec;
}

TEST_CASE("Job: DeadlineExceededError is classified and restarted from the checkpoint", "[job][classify]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(5);
  h.launcher.Print("tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded");
  h.checkpoint = CheckpointRef{"/ckpt/ckpt-100.pt", 100};
  h.launcher.Exit(1);
  CHECK(h.job->state() == JobState::kBackoff);
  const JobSnapshot s = h.job->Snapshot();
  REQUIRE(s.last_incident.has_value());
  CHECK(s.last_incident->failure.failure_class == FailureClass::kDeadlineExceeded);
  CHECK(s.last_incident->failure.action == RecoveryAction::kResetAndRestart);
  CHECK(s.last_incident->failure.matched_line.find("DeadlineExceededError") != std::string::npos);
  CHECK(s.restarts_by_reason.at("deadline_exceeded") == 1);
  CHECK(s.reason.find("deadline_exceeded") != std::string::npos);
  h.clock.AdvanceSeconds(1);
  REQUIRE(h.launcher.launched.size() == 2);
  CHECK(h.launcher.last().spec.env.at("TPUD_CHECKPOINT_STEP") == "100");
}

TEST_CASE("Job: an HBM OOM fails after one attempt with the hint, without retrying", "[job][classify]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 17.5G of 15.48G hbm.");
  h.launcher.Print("F0000 00:00:1717141650.893 1 check.cc:10] Check failed: ok");
  h.launcher.Kill(SIGABRT);
  CHECK(h.job->state() == JobState::kFailed);
  CHECK(h.launcher.launched.size() == 1);
  const JobSnapshot s = h.job->Snapshot();
  CHECK(s.last_incident->failure.failure_class == FailureClass::kHbmOom);
  CHECK_FALSE(s.last_incident->open);
  CHECK(s.reason.find("hbm_oom") != std::string::npos);
  CHECK(s.reason.find(s.last_incident->failure.hint) != std::string::npos);
  h.clock.AdvanceSeconds(1000);
  CHECK(h.launcher.launched.size() == 1);
}

TEST_CASE("Job: a user rule overrides the built-in rules", "[job][classify]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.failure_rules.push_back(
      {"NCCL_TIMEOUT", FailureClass::kConnection, RecoveryAction::kFail, "check the interconnect"});
  Harness h(spec);
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("watchdog: NCCL_TIMEOUT after 1800s");
  h.launcher.Exit(1);
  CHECK(h.job->state() == JobState::kFailed);
  CHECK(h.job->Snapshot().last_incident->failure.rule == "user:0");
  CHECK(h.job->Snapshot().reason.find("check the interconnect") != std::string::npos);
}

TEST_CASE("Job: the same failure at the same step twice in a row is deterministic", "[job][classify]") {
  Harness h(WithProgress(900, 600));
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("step=40 loss=0.5");
  h.launcher.Exit(1);
  REQUIRE(h.job->state() == JobState::kBackoff);
  h.clock.AdvanceSeconds(1);
  h.launcher.Print("step=40 loss=0.5");
  h.launcher.Exit(1);
  CHECK(h.job->state() == JobState::kFailed);
  CHECK(h.job->Snapshot().reason.find("same step twice") != std::string::npos);
  CHECK(h.launcher.launched.size() == 2);
}

TEST_CASE("Job: the same failure at a later step is restarted", "[job][classify]") {
  Harness h(WithProgress(900, 600));
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("step=40");
  h.launcher.Exit(1);
  h.clock.AdvanceSeconds(1);
  h.launcher.Print("step=80");
  h.launcher.Exit(1);
  CHECK(h.job->state() == JobState::kBackoff);
}

TEST_CASE("Job: a job silent past startup grace is a hang, stopped by the ladder and restarted", "[job][hang]") {
  JobSpec spec = WithProgress(30, 10);
  spec.stop.signals = {SIGINT, SIGKILL};
  Harness h(spec);
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(29.5);
  CHECK(h.job->state() == JobState::kRunning);
  h.clock.AdvanceSeconds(0.5);  // The deadline: startup grace from the attempt start.
  CHECK(h.job->state() == JobState::kStopping);
  CHECK(h.job->Snapshot().reason.find("hang") != std::string::npos);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGINT});
  h.launcher.Exit(130);
  CHECK(h.job->state() == JobState::kBackoff);
  const Incident incident = *h.job->Snapshot().last_incident;  // A copy: the snapshot is a temporary.
  CHECK(incident.failure.failure_class == FailureClass::kHang);
  CHECK(incident.failure.rule == "hang");
  h.clock.AdvanceSeconds(1);
  CHECK(h.launcher.launched.size() == 2);
}

TEST_CASE("Job: progress moves the hang deadline, silence after it is a hang at timeout", "[job][hang]") {
  Harness h(WithProgress(900, 60));
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(100);
  h.launcher.Print("step=1 loss=1.0");  // First progress: the deadline moves from 900 s to 160 s.
  h.clock.AdvanceSeconds(50);
  h.launcher.Print("compiling... (not progress)");
  h.launcher.Print("step=2 loss=0.9");  // At 150 s: deadline 210 s.
  h.clock.AdvanceSeconds(59);
  CHECK(h.job->state() == JobState::kRunning);
  h.clock.AdvanceSeconds(1);
  CHECK(h.job->state() == JobState::kStopping);
  h.launcher.Exit(130);
  CHECK(h.job->Snapshot().last_incident->step_reached == 2);
}

TEST_CASE("Job: no progress section means no hang timeout", "[job][hang]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(100000);
  CHECK(h.job->state() == JobState::kRunning);
}

TEST_CASE("Job: a stop while tpud is stopping a hung attempt stops the job for good", "[job][hang]") {
  Harness h(WithProgress(5, 5));
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(5);
  REQUIRE(h.job->state() == JobState::kStopping);
  REQUIRE(h.job->Stop("operator").ok());
  h.launcher.Exit(130);
  CHECK(h.job->state() == JobState::kStopped);
  h.clock.AdvanceSeconds(100);
  CHECK(h.launcher.launched.size() == 1);
}

TEST_CASE("Job: preemptions never count against max_restarts", "[job][budget]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.restart.max_restarts = 1;
  Harness h(spec);
  REQUIRE(h.job->Start("test").ok());
  for (int i = 0; i < 5; ++i) {
    h.launcher.Print("WARNING:tensorflow:TPU node my-tpu reached an unrecoverable state PREEMPTED, "
                     "terminating the session now.");
    h.launcher.Exit(1);
    REQUIRE(h.job->state() == JobState::kBackoff);
    CHECK_FALSE(h.job->Snapshot().last_incident->counted);
    h.clock.AdvanceSeconds(10);
  }
  CHECK(h.job->Snapshot().restarts == 0);
  h.launcher.Exit(1);  // An ordinary failure uses the budget...
  h.clock.AdvanceSeconds(10);
  h.launcher.Exit(1);  // ...and the next one exhausts it.
  CHECK(h.job->state() == JobState::kFailed);
}

// TF's "preemption of a connected worker" is printed when the TPU server
// cannot be reached (Cloud TPU troubleshooting guide): a wrong address must
// use up the budget instead of restarting forever as a preemption would.
TEST_CASE("Job: TF's \"preemption of a connected worker\" counts against max_restarts", "[job][budget]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.restart.max_restarts = 1;
  Harness h(spec);
  REQUIRE(h.job->Start("test").ok());
  for (int i = 0; i < 2; ++i) {
    h.launcher.Print("INFO:tensorflow:An error was raised. This may be due to a preemption in a "
                     "connected worker or parameter server. The current session will be closed.");
    h.launcher.Exit(1);
    CHECK(h.job->Snapshot().last_incident->failure.failure_class == FailureClass::kConnection);
    h.clock.AdvanceSeconds(10);
  }
  CHECK(h.job->state() == JobState::kFailed);
  CHECK(h.job->Snapshot().last_incident->counted);
}

TEST_CASE("Job: a maintenance notice sends the checkpoint signal, the exit waits out the event, uncounted", "[job][maintenance]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(5);
  h.maintenance = true;
  h.job->OnMaintenanceNotice("instance/maintenance-event=TERMINATE_ON_HOST_MAINTENANCE");
  CHECK(h.launcher.last().signals == std::vector<int>{SIGTERM});
  h.launcher.Exit(143);
  CHECK(h.job->state() == JobState::kBackoff);
  const Incident incident = *h.job->Snapshot().last_incident;
  CHECK(incident.failure.failure_class == FailureClass::kPreemption);
  CHECK_FALSE(incident.counted);
  h.clock.AdvanceSeconds(3600);
  CHECK(h.launcher.launched.size() == 1);  // Still waiting.
  h.maintenance = false;
  h.job->OnMaintenanceOver();
  CHECK(h.job->state() == JobState::kStarting);
  CHECK(h.launcher.launched.size() == 2);
  CHECK(h.job->Snapshot().restarts == 0);
}

TEST_CASE("Job: an incident records steps lost and downtime once the next attempt runs", "[job][incident]") {
  Harness h(WithProgress(900, 600));
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("step=130");
  h.checkpoint = CheckpointRef{"/ckpt/ckpt-100.pt", 100};
  h.launcher.Kill(SIGKILL);
  REQUIRE(h.listener.incidents.back().open);
  h.clock.AdvanceSeconds(1.0);  // Backoff.
  h.clock.AdvanceSeconds(1.0);  // start_seconds: the new attempt is running.
  const Incident& closed = h.listener.incidents.back();
  CHECK_FALSE(closed.open);
  CHECK(closed.outcome == "restarted");
  CHECK(closed.step_reached == 130);
  CHECK(closed.checkpoint_step == 100);
  CHECK(closed.steps_lost() == 30);
  REQUIRE(closed.downtime.has_value());
  CHECK(closed.downtime->count() == Approx(2.0));
}

TEST_CASE("Job: an incident closes when the next attempt exits 0 or is stopped before it is up",
          "[job][incident]") {
  Harness h;
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Exit(1);
  REQUIRE(h.listener.incidents.back().open);
  h.clock.AdvanceSeconds(1.0);  // Backoff: attempt 2 is starting.
  REQUIRE(h.job->state() == JobState::kStarting);
  h.clock.AdvanceSeconds(0.25);
  SECTION("exits 0") {
    h.launcher.Exit(0);
    CHECK(h.job->state() == JobState::kSucceeded);
    CHECK_FALSE(h.listener.incidents.back().open);
    CHECK(h.listener.incidents.back().outcome == "restarted");
    REQUIRE(h.listener.incidents.back().downtime.has_value());
    CHECK(h.listener.incidents.back().downtime->count() == Approx(1.25));
  }
  SECTION("stopped") {
    REQUIRE(h.job->Stop("test").ok());
    h.launcher.Kill(SIGINT);
    CHECK(h.job->state() == JobState::kStopped);
    CHECK_FALSE(h.listener.incidents.back().open);
    CHECK(h.listener.incidents.back().outcome == "stopped");
  }
}

TEST_CASE("Job: the default stop ladder is SIGINT, SIGTERM, SIGQUIT, SIGKILL", "[job][stop]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.stop = StopPolicy{};
  spec.stop.grace_seconds = 1;
  Harness h(spec);
  REQUIRE(h.job->Start("test").ok());
  REQUIRE(h.job->Stop("test").ok());
  h.clock.AdvanceSeconds(10);
  CHECK(h.launcher.last().signals == std::vector<int>{SIGINT, SIGTERM, SIGQUIT, SIGKILL});
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Job: reset_and_restart resets the TPU first, then restarts and records the reset", "[job][reset]") {
  testing::Harness h(testing::Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("DeadlineExceededError: Deadline Exceeded");
  h.launcher.Exit(1);
  REQUIRE(h.resets.size() == 1);
  CHECK(h.resets[0].first.failure_class == FailureClass::kDeadlineExceeded);
  CHECK(h.job->state() == JobState::kBackoff);
  h.clock.AdvanceSeconds(600);  // No restart while the reset runs, however long.
  CHECK(h.launcher.launched.size() == 1);
  h.resets[0].second(TpuResetResult{true, "api", Seconds(42), absl::OkStatus()});
  CHECK(h.job->Snapshot().last_incident->reset_backend == "api");
  CHECK(h.job->Snapshot().last_incident->reset_duration->count() == 42);
  CHECK(h.job->Snapshot().reason.find("TPU reset (api) done") != std::string::npos);
  h.clock.AdvanceSeconds(1);
  CHECK(h.launcher.launched.size() == 2);
}

TEST_CASE("Job: a stop during a TPU reset wins over the reset's restart", "[job][reset]") {
  testing::Harness h(testing::Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Print("DeadlineExceededError: Deadline Exceeded");
  h.launcher.Exit(1);
  REQUIRE(h.job->Stop("operator").ok());
  h.resets[0].second(TpuResetResult{true, "api", Seconds(1), absl::OkStatus()});
  h.clock.AdvanceSeconds(100);
  CHECK(h.job->state() == JobState::kStopped);
  CHECK(h.launcher.launched.size() == 1);
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

using testing::Harness;

TEST_CASE("Job: goodput splits wall time into startup, restore, progress, waste and recovery",
          "[job][goodput]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.progress.configured = true;
  spec.progress.regex = R"(^step=(\d+))";
  spec.progress.restore_regex = "^restoring checkpoint";
  Harness h(spec);
  REQUIRE(h.job->Start("test").ok());
  h.clock.AdvanceSeconds(4);  // Startup: imports, compilation.
  h.launcher.PrintBlock("step=10 loss=2.0\n");
  h.clock.AdvanceSeconds(10);
  h.launcher.PrintBlock("checkpoint saved\nstep=20 loss=1.5\n");
  h.clock.AdvanceSeconds(10);
  h.launcher.Print("step=30 loss=1.2");
  h.clock.AdvanceSeconds(2);
  h.checkpoint = CheckpointRef{"/ckpt/ckpt-20.pt", 20};
  h.launcher.Kill(SIGABRT);  // At t=26; step 20 was reached at t=14.
  h.clock.AdvanceSeconds(1);  // Backoff: 1 s.
  REQUIRE(h.launcher.launched.size() == 2);
  h.clock.AdvanceSeconds(3);
  h.launcher.PrintBlock("importing\nrestoring checkpoint /ckpt/ckpt-20.pt\n");
  h.clock.AdvanceSeconds(2);
  h.launcher.PrintBlock("step=30 loss=1.2\n");
  h.clock.AdvanceSeconds(5);

  const GoodputFigures f = h.job->Snapshot().goodput;
  CHECK(f.badput_of(BadputCause::kStartup).count() == Approx(4 + 3));
  CHECK(f.badput_of(BadputCause::kCheckpointRestore).count() == Approx(2));
  CHECK(f.badput_of(BadputCause::kWastedProgress).count() == Approx(12));
  CHECK(f.badput_of(BadputCause::kRecovery).count() == Approx(1));
  CHECK(f.productive.count() == Approx(10 + 5));
  CHECK(f.wall().count() == Approx(37));
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Job: an attempt re-attached after a tpud restart counts as progressing from then",
          "[job][goodput]") {
  JobSpec spec = Harness::DefaultSpec();
  spec.progress.configured = true;
  spec.progress.regex = R"(^step=(\d+))";
  spec.progress.timeout_seconds = 0;
  Harness h(spec);
  h.job->Restore(JobState::kRunning, "running", h.clock.WallNow(), 3, 1, 3, {}, std::nullopt, {});
  LaunchSpec launch;
  launch.job = "digits";
  absl::StatusOr<std::unique_ptr<Attempt>> adopted = h.launcher.Launch(launch, h.job.get());
  REQUIRE(adopted.ok());
  h.job->Resume(std::move(*adopted), 3);
  h.clock.AdvanceSeconds(10);
  h.launcher.PrintBlock("step=500 loss=0.1\n");
  h.clock.AdvanceSeconds(5);
  const GoodputFigures f = h.job->Snapshot().goodput;
  CHECK(f.productive.count() == Approx(15));
  CHECK(f.badput_of(BadputCause::kStartup).count() == Approx(0));
}

}  // namespace
}  // namespace tpud
