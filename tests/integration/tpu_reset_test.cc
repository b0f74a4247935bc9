// TPU resets through the real binaries (issue 4): a job fails with
// DeadlineExceededError; tpud resets the node through the Cloud TPU API
// emulator (tests/fixtures/cloud_tpu_emulator.py), with the access token from
// the GCE metadata emulator, then restarts the job from its checkpoint; the
// incident records the reset's backend, duration and result. A reset the API
// refuses is recorded as failed, and the job restarts all the same.
#include <catch2/catch.hpp>

#include "tests/fixtures/cloud_tpu_emulator.h"
#include "tests/fixtures/gce_metadata_emulator.h"
#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"
#include "tests/integration/processes.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using json = nlohmann::json;

constexpr char kNode[] = "projects/p/locations/z/nodes/n";

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

// Emulators are children of this test process; keeps the harness's orphan
// cleanup (KillOrphans) from waiting for them.
class KeptChildGuard {
 public:
  explicit KeptChildGuard(int pid) : pid_(pid) { KeepChild(pid_); }
  ~KeptChildGuard() { ReleaseChild(pid_); }
  KeptChildGuard(const KeptChildGuard&) = delete;
  KeptChildGuard& operator=(const KeptChildGuard&) = delete;

 private:
  int pid_;
};

// The metadata server (for the token) and the Cloud TPU API, both emulated.
struct CloudFixture {
  MetadataEmulator metadata;
  KeptChildGuard keep_metadata{metadata.pid()};
  CloudTpuEmulator tpu{{"--node", kNode, "--op-delay", "0.1"}};
  KeptChildGuard keep_tpu{tpu.pid()};

  // tpud.yaml's top-level keys: the api backend at the emulator; the
  // metadata watcher off, the token still from the metadata emulator; the
  // local rung's devices and lock file inside `dir`.
  std::string DaemonYaml(const TempDir& dir) const {
    return "gce_metadata: {enabled: \"false\"}\n"
           "tpu:\n"
           "  name: n\n"
           "  project: p\n"
           "  zone: z\n"
           "  api_endpoint: " + YamlQuote(tpu.endpoint()) + "\n" +
           "  metadata_host: " + YamlQuote(metadata.host()) + "\n" +
           "  device_globs: [" + YamlQuote((dir / "dev").string() + "/accel*") + "]\n" +
           "  lock_file: " + YamlQuote((dir / "libtpu_lockfile").string()) + "\n" +
           "  reset: {backend: api, timeout_seconds: 30, poll_interval_seconds: 0.1}";
  }
};

std::string TrainerJob(const std::filesystem::path& ckpt) {
  return ShellJob("trainer", kTrainerScript,
                  "  env: {CKPT: " + YamlQuote(ckpt.string()) + "}\n" +
                      "  checkpoint: {dir: " + YamlQuote(ckpt.string()) +
                      ", layout: pattern, pattern: 'ckpt-(\\d+)'}\n" +
                      "  restart: {max_restarts: 3, backoff_initial_seconds: 0.1, backoff_jitter: 0}\n");
}

bool SawRequest(const CloudTpuEmulator& tpu, const std::string& what) {
  for (const std::string& request : tpu.Requests()) {
    if (request.find(what) != std::string::npos) return true;
  }
  return false;
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
  CHECK(SawRequest(cloud.tpu, std::string("POST /v2/") + kNode + ":stop 200"));
  CHECK(SawRequest(cloud.tpu, std::string("POST /v2/") + kNode + ":start 200"));
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
  CHECK_FALSE(SawRequest(cloud.tpu, ":stop 200"));

  const json incident = WaitForClosedIncident(tpud, "trainer", 1);
  INFO("incident: " << incident.dump());
  REQUIRE_FALSE(incident.is_null());
  CHECK(incident["reset_backend"] == "api");
  CHECK(incident["reset_result"] != "ok");
  CHECK_FALSE(incident["reset_result"].get<std::string>().empty());
  CHECK(incident["outcome"] == "restarted");
}

}  // namespace tpud::testing
