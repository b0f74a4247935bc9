// The Supervisor on fakes: what it adds to its jobs (the process groups a TPU
// reset and the preflight checks must spare, maintenance notices for every
// job, stopping all, one numbering of events), with its dependencies given
// once at construction.
#include "daemon/supervisor/supervisor.h"

#include <catch2/catch.hpp>
#include <csignal>

#include "tests/support/fake_clock.h"
#include "tests/support/fake_launcher.h"

namespace tpud {
namespace {

JobSpec Spec(const std::string& name) {
  JobSpec spec;
  spec.name = name;
  spec.command = {"/usr/bin/python3", "train.py"};
  spec.start_seconds = 1;
  spec.restart.backoff_initial_seconds = 1;
  spec.restart.backoff_max_seconds = 1;
  spec.stop.signals = {SIGTERM, SIGKILL};
  spec.stop.grace_seconds = 10;
  return spec;
}

struct Rig {
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  std::vector<TpuResetRequest> resets;
  std::vector<std::function<void(TpuResetResult)>> reset_done;
  std::vector<std::vector<int>> preflight_pgids;
  Supervisor supervisor{Deps(), {"/logs", "/state"}};

  Supervisor::Deps Deps() {
    Supervisor::Deps deps;
    deps.clock = &clock;
    deps.launcher = &launcher;
    deps.find_checkpoint = [](const CheckpointSpec&) -> absl::StatusOr<std::optional<CheckpointRef>> {
      return std::nullopt;
    };
    deps.random = [] { return 0.0; };
    deps.reset_tpu = [this](const TpuResetRequest& request, std::function<void(TpuResetResult)> done) {
      resets.push_back(request);
      reset_done.push_back(std::move(done));
    };
    deps.preflight = [this](const JobSpec&, const std::vector<int>& pgids) {
      preflight_pgids.push_back(pgids);
      return PreflightVerdict{};
    };
    return deps;
  }

  Rig() {
    REQUIRE(supervisor.AddJob(Spec("a")).ok());
    REQUIRE(supervisor.AddJob(Spec("b")).ok());
  }
  JobState State(const std::string& job) { return supervisor.Get(job)->state; }
  // Ends the attempt launched `index`-th (0: the first) with `code`.
  void Exit(std::size_t index, int code) {
    launcher.launched[index]->alive = false;
    launcher.launched[index]->observer->OnExit(ExitStatus{code, 0, false, {}});
  }
};

TEST_CASE("Supervisor: the preflight checks are told every live attempt's process group", "[supervisor]") {
  Rig rig;
  REQUIRE(rig.supervisor.Start("a", "test").ok());
  REQUIRE(rig.supervisor.Start("b", "test").ok());
  REQUIRE(rig.preflight_pgids.size() == 2);
  CHECK(rig.preflight_pgids[0].empty());
  CHECK(rig.preflight_pgids[1] == std::vector<int>{1001});  // a's attempt, to be spared.
}

TEST_CASE("Supervisor: a TPU reset for one job spares the other job's attempt", "[supervisor]") {
  Rig rig;
  REQUIRE(rig.supervisor.Start("a", "test").ok());
  REQUIRE(rig.supervisor.Start("b", "test").ok());
  rig.launcher.launched[0]->observer->OnOutputLine(
      "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded");
  rig.Exit(0, 1);
  REQUIRE(rig.resets.size() == 1);
  CHECK(rig.resets[0].job == "a");
  CHECK(rig.resets[0].failure_class == FailureClass::kDeadlineExceeded);
  CHECK(rig.resets[0].spare_pgids == std::vector<int>{1002});
  CHECK(rig.State("a") == JobState::kBackoff);
  CHECK(rig.State("b") == JobState::kStarting);
  // The reset done, a restarts after its backoff; b never noticed.
  rig.reset_done[0](TpuResetResult{true, "api", Seconds(3), absl::OkStatus()});
  rig.clock.AdvanceSeconds(1);
  CHECK(rig.State("a") == JobState::kStarting);
  CHECK(rig.launcher.launched.size() == 3);
  CHECK(rig.launcher.launched[1]->signals.empty());
}

TEST_CASE("Supervisor: a maintenance notice reaches every running job, its end restarts them", "[supervisor]") {
  Rig rig;
  REQUIRE(rig.supervisor.Start("a", "test").ok());
  REQUIRE(rig.supervisor.Start("b", "test").ok());
  rig.clock.AdvanceSeconds(1);
  rig.supervisor.OnMetadataChange("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE");
  CHECK(rig.supervisor.maintenance_active());
  CHECK(rig.launcher.launched[0]->signals == std::vector<int>{SIGTERM});
  CHECK(rig.launcher.launched[1]->signals == std::vector<int>{SIGTERM});
  rig.Exit(0, 0);  // Checkpointed and left: a preemption, whatever the code.
  rig.Exit(1, 143);
  CHECK(rig.State("a") == JobState::kBackoff);
  CHECK(rig.State("b") == JobState::kBackoff);
  CHECK(rig.supervisor.Get("a")->restarts == 0);
  rig.clock.AdvanceSeconds(60);
  CHECK(rig.launcher.launched.size() == 2);  // Nothing starts during the event.
  rig.supervisor.OnMetadataChange("instance/maintenance-event", "NONE");
  CHECK(rig.launcher.launched.size() == 4);
  CHECK(rig.State("a") == JobState::kStarting);
  CHECK(rig.State("b") == JobState::kStarting);
}

TEST_CASE("Supervisor: StopAll calls back once, when the last job has stopped", "[supervisor]") {
  Rig rig;
  REQUIRE(rig.supervisor.Start("a", "test").ok());
  REQUIRE(rig.supervisor.Start("b", "test").ok());
  int done = 0;
  rig.supervisor.StopAll("shutting down", [&] { ++done; });
  CHECK(done == 0);
  rig.Exit(0, -1);
  CHECK(done == 0);
  rig.Exit(1, -1);
  CHECK(done == 1);
  CHECK(rig.State("a") == JobState::kStopped);
  CHECK(rig.State("b") == JobState::kStopped);
}

TEST_CASE("Supervisor: events of all jobs share one increasing numbering", "[supervisor]") {
  Rig rig;
  REQUIRE(rig.supervisor.Start("a", "test").ok());
  REQUIRE(rig.supervisor.Start("b", "test").ok());
  rig.clock.AdvanceSeconds(1);
  const std::vector<NumberedEvent> all = rig.supervisor.EventHistory("", 0);
  REQUIRE(all.size() == 4);  // Each job: stopped -> starting -> running.
  for (std::size_t i = 1; i < all.size(); ++i) CHECK(all[i].sequence > all[i - 1].sequence);
  CHECK(rig.supervisor.EventHistory("b", 0).size() == 2);
  CHECK(rig.supervisor.EventHistory("", 1).back().sequence == all.back().sequence);
}

}  // namespace
}  // namespace tpud
