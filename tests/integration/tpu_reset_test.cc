// TPU resets through the real binaries: a job fails with
// DeadlineExceededError; tpud resets the node through the Cloud TPU API
// emulator (tests/support/cloud_tpu_emulator.py), with the access token from
// the GCE metadata emulator, then restarts the job from its checkpoint; the
// incident records the reset's backend, duration and result. A reset the API
// refuses is recorded as failed, and the job restarts all the same.
#include <catch2/catch.hpp>

#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"
#include "tests/integration/tpu_cloud.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using json = nlohmann::json;

// Attempt 1 reaches step 10, saves a checkpoint and dies with TensorFlow's
// deadline error; attempt 2 checks that it resumed from step 10 and succeeds.
constexpr char kTrainerScript[] = R"(
if [ "$TPUD_ATTEMPT" = 1 ]; then
  echo "step=10 loss=0.5"
  : > "$CKPT/ckpt-10"
  echo "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded" >&2
  exit 1
fi
echo "resumed from step $TPUD_CHECKPOINT_STEP"
[ "$TPUD_CHECKPOINT_STEP" = 10 ] || exit 3
sleep 0.5
exit 0
)";

std::string TrainerJob(const std::filesystem::path& ckpt) {
  return ShellJob("trainer", kTrainerScript,
                  "  env: {CKPT: " + YamlQuote(ckpt.string()) + "}\n" +
                      "  checkpoint: {dir: " + YamlQuote(ckpt.string()) +
                      ", layout: pattern, pattern: 'ckpt-(\\d+)'}\n" +
                      "  restart: {max_restarts: 3, backoff_initial_seconds: 0.1, backoff_jitter: 0}\n");
}

}  // namespace

TEST_CASE("TPU reset: DeadlineExceededError resets the node through the API, then the job "
          "resumes from its checkpoint", "[integration][tpu]") {
  CloudFixture cloud;
  TempDir dir;
  const auto ckpt = dir / "ckpt";
  std::filesystem::create_directories(ckpt);
  TpudProcess tpud(dir, TrainerJob(ckpt), cloud.DaemonYaml(dir));
  REQUIRE(tpud.Tpuctl({"start", "trainer"}).exit_code == 0);

  const json done = tpud.WaitForState("trainer", "succeeded", Seconds(30));
  INFO("tpud:\n" << tpud.StderrText());
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 2);
  CHECK_THAT(tpud.Logs("trainer"), Contains("resumed from step 10"));
  CHECK(cloud.SawRequest(std::string("POST /v2/") + kTpuNode + ":stop 200"));
  CHECK(cloud.SawRequest(std::string("POST /v2/") + kTpuNode + ":start 200"));
  CHECK(cloud.tpu.Node("n")["state"] == "READY");

  const json incident = WaitForClosedIncident(tpud, "trainer", 1);
  INFO("incident: " << incident.dump());
  REQUIRE_FALSE(incident.is_null());
  CHECK(incident["class"] == "deadline_exceeded");
  CHECK(incident["reset_backend"] == "api");
  CHECK(incident["reset_result"] == "ok");
  CHECK(incident["reset_duration_seconds"].get<double>() > 0);
  CHECK(incident["checkpoint_step"] == 10);
  CHECK(incident["outcome"] == "restarted");
  CHECK_THAT(tpud.Tpuctl({"events", "trainer"}).out, Contains("reset=api:"));
}

TEST_CASE("TPU reset: a reset the API refuses (403) is recorded as failed, and the job still "
          "restarts", "[integration][tpu]") {
  CloudFixture cloud;
  cloud.tpu.Control("fault?node=n&status=403");
  TempDir dir;
  const auto ckpt = dir / "ckpt";
  std::filesystem::create_directories(ckpt);
  TpudProcess tpud(dir, TrainerJob(ckpt), cloud.DaemonYaml(dir));
  REQUIRE(tpud.Tpuctl({"start", "trainer"}).exit_code == 0);

  const json done = tpud.WaitForState("trainer", "succeeded", Seconds(30));
  INFO("tpud:\n" << tpud.StderrText());
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 2);
  CHECK_FALSE(cloud.SawRequest(":stop 200"));

  const json incident = WaitForClosedIncident(tpud, "trainer", 1);
  INFO("incident: " << incident.dump());
  REQUIRE_FALSE(incident.is_null());
  CHECK(incident["reset_backend"] == "api");
  CHECK(incident["reset_result"] != "ok");
  CHECK_FALSE(incident["reset_result"].get<std::string>().empty());
  CHECK(incident["outcome"] == "restarted");
}

}  // namespace tpud::testing
