// The preflight seam of the job state machine (JobDeps::preflight): a failing
// check delays the launch in BACKOFF with the reason, asks for a TPU reset
// when one may help, never uses the restart budget, and yields to a stop.
#include <catch2/catch.hpp>

#include "tests/support/job_harness.h"

namespace tpud {
namespace {

using testing::Harness;

PreflightVerdict Failing(const std::string& why, std::optional<FailureClass> reset_for = {}) {
  return PreflightVerdict{absl::FailedPreconditionError(why), reset_for};
}

TEST_CASE("Job preflight: a failing check delays the start in BACKOFF with the reason", "[job][preflight]") {
  Harness h(Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  h.preflight_verdicts.push_back(Failing("environment: PJRT_DEVICE=CPU"));
  REQUIRE(h.job->Start("test").ok());
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.launcher.launched.empty());
  const JobSnapshot s = h.job->Snapshot();
  CHECK(s.reason == "preflight: environment: PJRT_DEVICE=CPU; checking again in 1.0s");
  CHECK(s.attempt == 0);
  CHECK(s.restarts == 0);
  CHECK_FALSE(s.last_incident.has_value());  // No attempt failed.
  CHECK(h.resets.empty());                   // No reset helps an environment check.
  h.clock.AdvanceSeconds(1);
  CHECK(h.preflight_calls == 2);
  REQUIRE(h.launcher.launched.size() == 1);
  CHECK(h.job->state() == JobState::kStarting);
  CHECK(h.job->Snapshot().attempt == 1);
}

TEST_CASE("Job preflight: a check a reset may fix asks for the reset, then checks again", "[job][preflight]") {
  Harness h(Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  h.preflight_verdicts.push_back(Failing("node: node state PREEMPTED", FailureClass::kPreemption));
  REQUIRE(h.job->Start("test").ok());
  REQUIRE(h.resets.size() == 1);
  CHECK(h.resets[0].first.failure_class == FailureClass::kPreemption);
  CHECK(h.job->Snapshot().reason == "preflight: node: node state PREEMPTED; resetting the TPU");
  h.clock.AdvanceSeconds(600);  // Nothing launches while the reset runs.
  CHECK(h.launcher.launched.empty());
  h.resets[0].second(TpuResetResult{true, "api", Seconds(30), absl::OkStatus()});
  CHECK(h.preflight_calls == 2);
  CHECK(h.launcher.launched.size() == 1);
}

TEST_CASE("Job preflight: only the first failure in a row resets, later ones back off, doubling",
          "[job][preflight]") {
  Harness h(Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  for (int i = 0; i < 3; ++i) h.preflight_verdicts.push_back(Failing("holders: pid 7", FailureClass::kDeviceBusy));
  REQUIRE(h.job->Start("test").ok());
  REQUIRE(h.resets.size() == 1);
  h.resets[0].second(TpuResetResult{true, "local", Seconds(1), absl::OkStatus()});
  CHECK(h.resets.size() == 1);
  CHECK(h.job->Snapshot().reason == "preflight: holders: pid 7; checking again in 2.0s");
  h.clock.AdvanceSeconds(2);
  CHECK(h.job->Snapshot().reason == "preflight: holders: pid 7; checking again in 4.0s");
  h.clock.AdvanceSeconds(4);
  CHECK(h.launcher.launched.size() == 1);
  CHECK(h.job->Snapshot().restarts == 0);
}

TEST_CASE("Job preflight: a stop while the start is delayed wins", "[job][preflight]") {
  Harness h(Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  h.preflight_verdicts.push_back(Failing("devices: no device file"));
  REQUIRE(h.job->Start("test").ok());
  REQUIRE(h.job->Stop("operator").ok());
  CHECK(h.job->state() == JobState::kStopped);
  h.clock.AdvanceSeconds(100);
  CHECK(h.launcher.launched.empty());
}

TEST_CASE("Job preflight: checks run before each restart too", "[job][preflight]") {
  Harness h(Harness::DefaultSpec(), /*with_tpu_reset=*/true);
  REQUIRE(h.job->Start("test").ok());
  h.launcher.Exit(1);  // An unknown failure: plain restart after 1 s.
  h.preflight_verdicts.push_back(Failing("node: node state READY, health UNHEALTHY_MAINTENANCE"));
  h.clock.AdvanceSeconds(1);
  CHECK(h.job->state() == JobState::kBackoff);
  CHECK(h.launcher.launched.size() == 1);
  h.clock.AdvanceSeconds(1);
  CHECK(h.launcher.launched.size() == 2);
  CHECK(h.job->Snapshot().attempt == 2);
}

}  // namespace
}  // namespace tpud
