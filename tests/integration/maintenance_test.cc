// Maintenance events through the real binaries and the GCE metadata server
// emulator (tests/support/gce_metadata_emulator.py): tpud long-polls
// instance/maintenance-event, sends the job its checkpoint signal on a
// notice, holds the restart until the event is over, and does not charge the
// restart budget for it.
#include <catch2/catch.hpp>

#include "tests/support/gce_metadata_emulator.h"
#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"
#include "tests/integration/processes.h"
#include "tests/integration/tpu_cloud.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

constexpr char kMaintenanceKey[] = "instance/maintenance-event";

// Checkpoints on SIGTERM (tpud's default checkpoint_signal) the way a trainer
// would: says so, then exits 143.
constexpr char kTrainerScript[] = R"(
trap 'echo "got SIGTERM"; exit 143' TERM
echo "attempt $TPUD_ATTEMPT up"
while :; do sleep 0.1; done
)";

bool LogHas(const TpudProcess& tpud, const std::string& job, const std::string& text) {
  return tpud.Logs(job).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("Maintenance: a maintenance event sends the checkpoint signal, holds the restart "
          "until it is over, and does not count against max_restarts",
          "[integration][maintenance]") {
  MetadataEmulator emulator;
  KeptChild keep_emulator(emulator.pid());
  TempDir dir;
  TpudProcess tpud(dir,
                   ShellJob("trainer", kTrainerScript,
                            "  stop: {grace_seconds: 1}\n"
                            "  restart: {max_restarts: 1, backoff_initial_seconds: 0.1, "
                            "backoff_jitter: 0}\n"),
                   "gce_metadata: {enabled: \"true\", host: " + YamlQuote(emulator.host()) + "}");
  REQUIRE(tpud.Tpuctl({"start", "trainer"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("trainer", "running")["state"] == "running");
  REQUIRE(WaitFor([&] { return LogHas(tpud, "trainer", "attempt 1 up"); }, Seconds(5)));
  // Both watched keys (preempted, maintenance-event) are long-polling.
  REQUIRE(emulator.WaitForWaiters(2));

  emulator.Control(std::string("set?key=") + kMaintenanceKey + "&value=TERMINATE_ON_HOST_MAINTENANCE");
  CHECK(WaitFor([&] { return LogHas(tpud, "trainer", "got SIGTERM"); }, Seconds(5)));
  const json waiting = tpud.WaitForState("trainer", "backoff");
  REQUIRE(waiting["state"] == "backoff");
  CHECK_THAT(waiting["reason"].get<std::string>(),
             StartsWith("preemption: exit code 143") && Contains("waiting for the maintenance event"));
  CHECK(waiting["backoff_remaining_seconds"] == 0);  // No timer: only the event's end restarts it.
  CHECK(waiting["attempt"] == 1);
  CHECK(waiting["restarts"] == 0);

  const json open = LatestIncident(tpud.Events("trainer"), 1);
  REQUIRE_FALSE(open.is_null());
  CHECK(open["class"] == "preemption");
  CHECK(open["action"] == "wait_and_restart");
  CHECK(open["rule"] == "metadata:instance/maintenance-event=TERMINATE_ON_HOST_MAINTENANCE");
  CHECK(open["counted"] == false);
  CHECK(open["open"] == true);
  CHECK(open["outcome"] == "waiting for the maintenance event to end");
  CHECK(tpud.Status("trainer")["state"] == "backoff");  // Still waiting.

  emulator.Control(std::string("set?key=") + kMaintenanceKey + "&value=NONE");
  REQUIRE(WaitFor([&] { return LogHas(tpud, "trainer", "attempt 2 up"); }, Seconds(10)));
  const json running = tpud.WaitForState("trainer", "running");
  REQUIRE(running["state"] == "running");
  CHECK(running["attempt"] == 2);
  CHECK(running["restarts"] == 0);
  CHECK(running["failures_by_class"] == json{{"preemption", 1}});

  const std::vector<json> events = tpud.Events("trainer");
  INFO("events:\n" << json(events).dump(1));
  CHECK_FALSE(FindTransition(events, "starting", "the maintenance event is over").is_null());
  const json closed = WaitForClosedIncident(tpud, "trainer", 1);
  REQUIRE_FALSE(closed.is_null());
  CHECK(closed["class"] == "preemption");
  CHECK(closed["counted"] == false);
  CHECK(closed["exit"]["code"] == 143);
  CHECK(closed["outcome"] == "restarted");
}

}  // namespace tpud::testing
