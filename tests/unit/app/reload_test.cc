// Config reload planning (daemon/app/reload.h): which jobs are added,
// changed, removed or kept running, and which top-level keys wait for a restart.
#include "daemon/app/reload.h"

#include <catch2/catch.hpp>

#include "daemon/app/systemd_notify.h"

namespace tpud {
namespace {

JobSpec Spec(const std::string& name, const std::string& origin = "config:/etc/tpud/tpud.yaml") {
  JobSpec spec;
  spec.name = name;
  spec.command = {"/bin/true"};
  spec.origin = origin;
  return spec;
}

DaemonConfig ConfigWith(std::vector<JobSpec> jobs) {
  DaemonConfig config;
  config.config_path = "/etc/tpud/tpud.yaml";
  config.jobs = std::move(jobs);
  return config;
}

std::vector<std::string> Names(const std::vector<JobSpec>& specs) {
  std::vector<std::string> names;
  for (const JobSpec& spec : specs) names.push_back(spec.name);
  return names;
}

using Names_ = std::vector<std::string>;

TEST_CASE("Reload: an identical config changes nothing", "[reload]") {
  const DaemonConfig config = ConfigWith({Spec("a"), Spec("b")});
  const ReloadPlan plan = PlanReload(config, config, {{Spec("a"), true}, {Spec("b"), false}});
  CHECK(plan.empty());
  CHECK(DescribePlan(plan) == "no changes");
}

TEST_CASE("Reload: a new name is added, a different spec is changed", "[reload]") {
  JobSpec a2 = Spec("a");
  a2.command = {"/bin/false"};
  const ReloadPlan plan =
      PlanReload(ConfigWith({Spec("a")}), ConfigWith({a2, Spec("b")}), {{Spec("a"), true}});
  CHECK(Names(plan.added) == Names_{"b"});
  CHECK(Names(plan.changed) == Names_{"a"});
  CHECK(plan.changed[0].command == std::vector<std::string>{"/bin/false"});
  CHECK(plan.removed.empty());
  CHECK(plan.orphaned.empty());
  CHECK(DescribePlan(plan) == "added b; changed a");
}

TEST_CASE("Reload: every spec field counts as a change", "[reload]") {
  JobSpec changed = Spec("a");
  SECTION("env") { changed.env["X"] = "1"; }
  SECTION("restart policy") { changed.restart.max_restarts = 3; }
  SECTION("stop signals") { changed.stop.signals = {15}; }
  SECTION("failure rules") {
    changed.failure_rules.push_back({"OOM", FailureClass::kHbmOom, RecoveryAction::kFail, ""});
  }
  SECTION("progress") { changed.progress.timeout_seconds = 5; }
  SECTION("origin (a moved file)") { changed.origin = "config:/etc/tpud/jobs.d/a.yaml"; }
  const ReloadPlan plan = PlanReload(ConfigWith({Spec("a")}), ConfigWith({changed}), {{Spec("a"), false}});
  CHECK(Names(plan.changed) == Names_{"a"});
}

TEST_CASE("Reload: a dropped job is removed when inactive, kept and marked when active", "[reload]") {
  const ReloadPlan plan = PlanReload(ConfigWith({Spec("idle"), Spec("busy")}), ConfigWith({}),
                                     {{Spec("idle"), false}, {Spec("busy"), true}});
  CHECK(plan.removed == Names_{"idle"});
  REQUIRE(Names(plan.orphaned) == Names_{"busy"});
  CHECK(plan.orphaned[0].origin == "removed-from-config:/etc/tpud/tpud.yaml");
  CHECK(plan.orphaned[0].command == Spec("busy").command);
  CHECK(DescribePlan(plan) == "removed idle; kept running busy (removed from the config)");
}

TEST_CASE("Reload: a marked job is left alone while active, removed once inactive, re-adopted when back",
          "[reload]") {
  const JobSpec marked = Spec("busy", "removed-from-config:/etc/tpud/tpud.yaml");
  CHECK(PlanReload(ConfigWith({}), ConfigWith({}), {{marked, true}}).empty());
  CHECK(PlanReload(ConfigWith({}), ConfigWith({}), {{marked, false}}).removed == Names_{"busy"});
  const ReloadPlan back = PlanReload(ConfigWith({}), ConfigWith({Spec("busy")}), {{marked, true}});
  CHECK(Names(back.changed) == Names_{"busy"});
  CHECK(back.changed[0].origin == "config:/etc/tpud/tpud.yaml");
}

TEST_CASE("Reload: submitted and ad hoc jobs are left alone unless the config names them", "[reload]") {
  const std::vector<RunningJob> jobs = {{Spec("sub", "submitted:/home/me/sub.yaml"), false},
                                        {Spec("adhoc", "adhoc"), true}};
  CHECK(PlanReload(ConfigWith({}), ConfigWith({}), jobs).empty());
  const ReloadPlan adopt = PlanReload(ConfigWith({}), ConfigWith({Spec("sub")}), jobs);
  CHECK(Names(adopt.changed) == Names_{"sub"});
  CHECK(adopt.removed.empty());
}

TEST_CASE("Reload: top-level keys other than jobs wait for a restart", "[reload]") {
  const DaemonConfig running = ConfigWith({});
  DaemonConfig next = running;
  next.socket = "/tmp/other.sock";
  next.socket_group = "tpud";
  next.metrics.listen = "0.0.0.0:9464";
  next.jobs_dir = "/etc/tpud/jobs.d";  // Applies: jobs are re-read.
  next.tpu.backend = "api";
  const ReloadPlan plan = PlanReload(running, next, {});
  CHECK(plan.restart_needed == Names_{"socket", "socket_group", "metrics.listen", "tpu"});
  CHECK(DescribePlan(plan) == "unchanged until tpud restarts: socket, socket_group, metrics.listen, tpu");
}

TEST_CASE("systemd STATUS=: jobs summarized by state", "[reload]") {
  CHECK(SummarizeJobs({}) == "no jobs");
  JobSnapshot running, backoff, stopped;
  running.state = JobState::kRunning;
  backoff.state = JobState::kBackoff;
  stopped.state = JobState::kStopped;
  CHECK(SummarizeJobs({stopped}) == "1 job: 1 stopped");
  CHECK(SummarizeJobs({running, backoff, running}) == "3 jobs: 2 running, 1 backoff");
}

}  // namespace
}  // namespace tpud
