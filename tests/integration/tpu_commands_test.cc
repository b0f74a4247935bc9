// The TPU by hand and before each attempt, through the real binaries and the
// Cloud TPU API emulator: `tpuctl tpu` shows the node, `tpuctl reset-tpu`
// resets it, `tpuctl doctor` lists the checks with fixes, and the preflight
// check starts a PREEMPTED node before launching the job.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"
#include "tests/integration/tpu_cloud.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using json = nlohmann::json;

constexpr char kQuickJob[] = "echo \"attempt $TPUD_ATTEMPT up\"\nsleep 0.5\nexit 0\n";

}  // namespace

TEST_CASE("TPU commands: tpuctl tpu shows the node, reset-tpu resets it, doctor lists the checks",
          "[integration][tpu]") {
  CloudFixture cloud;
  cloud.tpu.Control("set_node?node=n&health=UNHEALTHY_MAINTENANCE&healthDescription=host%20maintenance");
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("trainer", kQuickJob, "  env: {PJRT_DEVICE: CPU}\n"), cloud.DaemonYaml(dir));

  const CommandResult tpu = tpud.Tpuctl({"tpu"});
  INFO("tpuctl tpu:\n" << tpu.out << tpu.err);
  REQUIRE(tpu.exit_code == 0);
  CHECK_THAT(tpu.out, Contains("backend:     api\n"));
  CHECK_THAT(tpu.out, Contains(std::string("node:        ") + kTpuNode + " (v4-8)\n"));
  CHECK_THAT(tpu.out, Contains("health:      UNHEALTHY_MAINTENANCE: host maintenance\n"));
  const json as_json = json::parse(tpud.Tpuctl({"tpu", "--json"}).out);
  CHECK(as_json["node"]["state"] == "READY");

  cloud.tpu.Control("set_node?node=n&health=HEALTHY");
  const CommandResult reset = tpud.Tpuctl({"reset-tpu"}, Seconds(30));
  INFO("tpuctl reset-tpu:\n" << reset.out << reset.err);
  CHECK(reset.exit_code == 0);
  CHECK_THAT(reset.out, Contains("TPU reset (api) done in"));
  CHECK(cloud.SawRequest(std::string("POST /v2/") + kTpuNode + ":stop 200"));
  CHECK(cloud.SawRequest(std::string("POST /v2/") + kTpuNode + ":start 200"));
  CHECK_THAT(tpud.Tpuctl({"tpu"}).out, Contains("resets:      1 in the last hour (max 6)\n"));

  const CommandResult wrong = tpud.Tpuctl({"reset-tpu", "--backend", "gcloud"});
  CHECK(wrong.exit_code == 4);
  CHECK_THAT(wrong.err, Contains("not configured"));

  const CommandResult doctor = tpud.Tpuctl({"doctor", "trainer"});
  INFO("tpuctl doctor:\n" << doctor.out << doctor.err);
  CHECK(doctor.exit_code == 1);
  CHECK_THAT(doctor.out, Contains("job trainer:\n"));
  CHECK_THAT(doctor.out, Contains("\u2713 node         node state READY, health HEALTHY"));
  CHECK_THAT(doctor.out, Contains("\u2717 environment  PJRT_DEVICE=CPU"));
  CHECK_THAT(doctor.out, Contains("fix: set PJRT_DEVICE=TPU in the job's env"));
  CHECK_THAT(doctor.err, Contains("1 check failed"));
}

TEST_CASE("TPU commands: reset-tpu shows each node state it waits through, one line per change when piped",
          "[integration][tpu]") {
  CloudFixture cloud("4.5");  // Each of stop and start takes 4.5 s: polls every 2 s see each state.
  TempDir dir;
  TpudProcess tpud(dir, "", cloud.DaemonYaml(dir));
  const CommandResult reset = tpud.Tpuctl({"reset-tpu"}, Seconds(30));
  INFO("tpuctl reset-tpu:\n" << reset.out << reset.err);
  CHECK(reset.exit_code == 0);
  CHECK_THAT(reset.out, Contains("TPU reset (api) done in"));
  CHECK(reset.out.find("reset-tpu: +") == std::string::npos);  // Progress is on stderr only.
  const std::vector<std::string> lines = Lines(reset.err);
  std::vector<std::string> states;
  for (const std::string& line : lines) {
    REQUIRE(line.rfind("reset-tpu: +", 0) == 0);
    states.push_back(line.substr(line.find(" node ") + 6));
  }
  const auto saw = [&](const std::string& state) {
    return std::any_of(states.begin(), states.end(), [&](const std::string& s) { return s.rfind(state, 0) == 0; });
  };
  CHECK(saw("STOPPING"));
  CHECK(saw("STARTING"));
  for (std::size_t i = 1; i < states.size(); ++i) CHECK(states[i] != states[i - 1]);  // One line per change.
}

TEST_CASE("Stop: stop shows the ladder's rung, and --wait follows it to stopped, one line per rung",
          "[integration][stop]") {
  TempDir dir;
  // Ignores SIGTERM: only the second rung (SIGKILL, 2 s later) ends it.
  TpudProcess tpud(dir, ShellJob("stubborn", "trap '' TERM; echo up; while :; do sleep 0.1; done",
                                 "  stop: {signals: [SIGTERM, SIGKILL], grace_seconds: 2}\n"));
  REQUIRE(tpud.Tpuctl({"start", "stubborn"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("stubborn", "running")["state"] == "running");
  const CommandResult stopped = tpud.Tpuctl({"stop", "stubborn", "--wait"});
  INFO("tpuctl stop --wait:\n" << stopped.out << stopped.err);
  CHECK(stopped.exit_code == 0);
  CHECK_THAT(stopped.err, Contains("stopping stubborn: +0.0s sent SIGTERM (1 of 2), SIGKILL in "));
  CHECK_THAT(stopped.out, Contains("stubborn: stopped"));
  CHECK(tpud.Status("stubborn")["state"] == "stopped");

  REQUIRE(tpud.Tpuctl({"start", "stubborn"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("stubborn", "running")["state"] == "running");
  const CommandResult at_once = tpud.Tpuctl({"stop", "stubborn"});
  CHECK(at_once.exit_code == 0);
  CHECK_THAT(at_once.out, Contains("stubborn: stopping"));
  CHECK_THAT(at_once.out, Contains("; sent SIGTERM (1 of 2), SIGKILL in "));
  CHECK(tpud.WaitForState("stubborn", "stopped", Seconds(10))["state"] == "stopped");
}

TEST_CASE("TPU preflight: a PREEMPTED node is started before the job's first attempt",
          "[integration][tpu]") {
  CloudFixture cloud;
  cloud.tpu.Control("set_node?node=n&state=PREEMPTED");
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("trainer", kQuickJob), cloud.DaemonYaml(dir));
  // `tpuctl tpu` describes the node, so the preflight check knows it is PREEMPTED.
  REQUIRE_THAT(tpud.Tpuctl({"tpu"}).out, Contains("state:       PREEMPTED\n"));
  REQUIRE(tpud.Tpuctl({"start", "trainer"}).exit_code == 0);

  const json done = tpud.WaitForState("trainer", "succeeded", Seconds(30));
  INFO("tpud:\n" << tpud.StderrText());
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 1);
  CHECK(cloud.SawRequest(std::string("POST /v2/") + kTpuNode + ":start 200"));
  CHECK_FALSE(cloud.SawRequest(":stop"));
  const std::vector<json> events = tpud.Events("trainer");
  INFO("events:\n" << json(events).dump(1));
  const json delayed = FindTransition(events, "backoff", "preflight: node: node state PREEMPTED");
  REQUIRE_FALSE(delayed.is_null());
  CHECK(delayed["from"] == "stopped");
  CHECK(delayed["attempt"] == 0);
}

}  // namespace tpud::testing
