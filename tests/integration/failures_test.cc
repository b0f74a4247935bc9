// Why an attempt failed and what tpud did about it, through the real binaries:
// a hang caught by the progress deadline and restarted from the newest
// checkpoint, signatures in the output deciding the class and the action,
// the restart budget's deterministic-failure rule, user rules ahead of the
// built-in ones, and the failure counter on /metrics.
#include <catch2/catch.hpp>

#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

// A fast restart policy: no jitter, 0.1 s backoff.
constexpr char kQuickRestarts[] =
    "  restart: {max_restarts: 3, backoff_initial_seconds: 0.1, backoff_jitter: 0}\n";

// Attempt 1 reports steps 10, 20 and 25, writing complete checkpoints at 10
// and 20 (and a partial one at 30 that must not count), then hangs. Later
// attempts print what tpud resumed them from, stay up past start_seconds and
// exit 0.
constexpr char kHangScript[] = R"(
if [ -n "$TPUD_CHECKPOINT" ]; then
  echo "resumed from $TPUD_CHECKPOINT (TPUD_CHECKPOINT_STEP $TPUD_CHECKPOINT_STEP) args: $0 $1"
  sleep 0.5
  exit 0
fi
for s in 10 20; do echo "step=$s loss=0.5"; : > "$CKPT/ckpt-$s"; done
: > "$CKPT/ckpt-30.tmp"
echo "step=25 loss=0.4"
exec sleep 600
)";

// Like the real TF traceback's last line (tensorflow errors_impl), on stderr.
constexpr char kDeadlineScript[] = R"(
if [ "$TPUD_ATTEMPT" = 1 ]; then
  echo "step=7 loss=1.25"
  echo "Traceback (most recent call last):" >&2
  echo "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded" >&2
  exit 1
fi
echo "attempt $TPUD_ATTEMPT up"
exec sleep 600
)";

// XLA's compile-time HBM OOM (openxla docs/errors/error_1000.md), as JAX prints it.
constexpr char kHbmOomLine[] =
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
    "Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by "
    "17.34G.";

}  // namespace

TEST_CASE("Failures: a job that goes silent is stopped as hung and restarted from its newest "
          "checkpoint", "[integration][failures]") {
  TempDir dir;
  const auto ckpt = dir / "ckpt";
  std::filesystem::create_directories(ckpt);
  TpudProcess tpud(dir, ShellJob("hangs", kHangScript,
                                 "  env: {CKPT: " + YamlQuote(ckpt.string()) + "}\n" +
                                     "  checkpoint: {dir: " + YamlQuote(ckpt.string()) +
                                     ", layout: pattern, pattern: 'ckpt-(\\d+)'}\n" +
                                     "  resume_args: [--resume-from, '{checkpoint}']\n" +
                                     "  progress: {regex: 'step=(\\d+)', startup_grace_seconds: 2, "
                                     "timeout_seconds: 1}\n" +
                                     "  stop: {grace_seconds: 1}\n" + kQuickRestarts));
  REQUIRE(tpud.Tpuctl({"start", "hangs"}).exit_code == 0);
  const json done = tpud.WaitForState("hangs", "succeeded", Seconds(20));
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 2);
  CHECK(done["restarts"] == 1);

  const std::vector<json> events = tpud.Events("hangs");
  INFO("events:\n" << json(events).dump(1));
  const json stopping = FindTransition(events, "stopping");
  REQUIRE_FALSE(stopping.is_null());
  CHECK(stopping["attempt"] == 1);
  CHECK_THAT(stopping["reason"].get<std::string>(), StartsWith("hang: no progress for"));
  CHECK_THAT(stopping["reason"].get<std::string>(), Contains("stopping the attempt to restart it"));
  const json restarted = FindTransition(events, "starting", "hang");
  REQUIRE_FALSE(restarted.is_null());
  CHECK(restarted["checkpoint"]["step"] == 20);

  const json incident = WaitForClosedIncident(tpud, "hangs", 1);
  REQUIRE_FALSE(incident.is_null());
  CHECK(incident["attempt"] == 1);
  CHECK(incident["class"] == "hang");
  CHECK(incident["rule"] == "hang");
  CHECK(incident["action"] == "reset_and_restart");
  CHECK(incident["exit"]["signal_name"] == "SIGINT");  // The default ladder's first rung.
  CHECK(incident["step_reached"] == 25);
  CHECK(incident["checkpoint_step"] == 20);
  CHECK(incident["steps_lost"] == 5);
  CHECK(incident["counted"] == true);
  CHECK(incident["outcome"] == "restarted");

  const std::string resumed = (ckpt / "ckpt-20").string();
  CHECK_THAT(tpud.Logs("hangs"), Contains("resumed from " + resumed + " (TPUD_CHECKPOINT_STEP 20) "
                                          "args: --resume-from " + resumed + "\n"));
}

TEST_CASE("Failures: DeadlineExceededError on stderr is classified deadline_exceeded and "
          "restarted", "[integration][failures]") {
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("deadline", kDeadlineScript,
                                 "  progress: {regex: 'step=(\\d+)'}\n" + std::string(kQuickRestarts)));
  REQUIRE(tpud.Tpuctl({"start", "deadline"}).exit_code == 0);
  REQUIRE(WaitFor([&] { return tpud.Logs("deadline").find("attempt 2 up") != std::string::npos; },
                  Seconds(10)));
  const json running = tpud.WaitForState("deadline", "running");
  REQUIRE(running["state"] == "running");
  CHECK(running["attempt"] == 2);
  CHECK(running["restarts"] == 1);
  CHECK(running["failures_by_class"] == json{{"deadline_exceeded", 1}});

  const json incident = WaitForClosedIncident(tpud, "deadline", 1);
  REQUIRE_FALSE(incident.is_null());
  CHECK(incident["class"] == "deadline_exceeded");
  CHECK(incident["rule"] == "builtin:deadline_exceeded");
  CHECK(incident["action"] == "reset_and_restart");
  CHECK_THAT(incident["matched_line"].get<std::string>(), Contains("DeadlineExceededError"));
  CHECK(incident["exit"]["code"] == 1);
  CHECK(incident["step_reached"] == 7);
  CHECK(incident["counted"] == true);
  CHECK(incident["outcome"] == "restarted");

  // The same incident is the status's last_failure.
  const json status = tpud.Status("deadline");
  REQUIRE(status.contains("last_failure"));
  CHECK(status["last_failure"]["class"] == "deadline_exceeded");
  CHECK(status["last_failure"]["id"] == 1);
}

TEST_CASE("Failures: an HBM OOM fails the job after one attempt and the status shows the hint",
          "[integration][failures]") {
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("oom", "echo '" + std::string(kHbmOomLine) + "' >&2; exit 1",
                                 kQuickRestarts));
  REQUIRE(tpud.Tpuctl({"start", "oom"}).exit_code == 0);
  const json failed = tpud.WaitForState("oom", "failed");
  REQUIRE(failed["state"] == "failed");
  CHECK(failed["attempt"] == 1);
  CHECK(failed["restarts"] == 0);
  CHECK_THAT(failed["reason"].get<std::string>(),
             StartsWith("hbm_oom: exit code 1 is not fixed by restarting: "));
  CHECK(CountTransitions(tpud.Events("oom"), "starting") == 1);

  const json& last = failed["last_failure"];
  REQUIRE(last.is_object());
  CHECK(last["class"] == "hbm_oom");
  CHECK(last["rule"] == "builtin:hbm_oom");
  CHECK(last["action"] == "fail");
  CHECK(last["matched_line"] == kHbmOomLine);
  CHECK(last["open"] == false);
  CHECK_THAT(last["outcome"].get<std::string>(), StartsWith("gave up: "));
  const std::string hint = last["hint"].get<std::string>();
  CHECK_THAT(hint, Contains("reduce the batch size") && Contains("error_1000"));

  const CommandResult detail = tpud.Tpuctl({"status", "oom"});
  REQUIRE(detail.exit_code == 0);
  CHECK_THAT(detail.out, Contains("hbm_oom") && Contains(hint));
}

TEST_CASE("Failures: /metrics counts failed attempts by class", "[integration][failures]") {
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("oom", "echo '" + std::string(kHbmOomLine) + "'; exit 1"));
  REQUIRE(tpud.Tpuctl({"start", "oom"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("oom", "failed")["state"] == "failed");
  const std::string address = tpud.Info()["metrics_address"].get<std::string>();
  const HttpResult scrape = HttpGet("http://" + address + "/metrics");
  INFO("curl: " << scrape.error << "\nscraped:\n" << scrape.body);
  REQUIRE(scrape.status == 200);
  CHECK_THAT(scrape.body, Contains("tpud_job_failures_total{job=\"oom\",class=\"hbm_oom\"} 1\n"));
  CHECK_THAT(scrape.body, Contains("# TYPE tpud_job_failures_total counter"));
  CHECK_THAT(scrape.body, Contains("tpud_job_state{job=\"oom\",state=\"failed\"} 1"));
}

TEST_CASE("Failures: the same crash at the same step twice in a row is deterministic: failed "
          "without spending the budget", "[integration][failures]") {
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("crashy",
                                 "echo step=5; echo 'F0501 12:00:00.000000 4242 tpu_client.cc:42] "
                                 "Check failed: status.ok()' >&2; exit 1",
                                 "  progress: {regex: 'step=(\\d+)'}\n" + std::string(kQuickRestarts)));
  REQUIRE(tpud.Tpuctl({"start", "crashy"}).exit_code == 0);
  const json failed = tpud.WaitForState("crashy", "failed");
  REQUIRE(failed["state"] == "failed");
  CHECK(failed["attempt"] == 2);  // max_restarts is 3: the budget did not end it.
  CHECK(failed["restarts"] == 1);
  CHECK_THAT(failed["reason"].get<std::string>(),
             Contains("crash: exit code 1 again at step 5") && Contains("deterministic"));
  CHECK(failed["failures_by_class"] == json{{"crash", 2}});
  CHECK(failed["last_failure"]["rule"] == "builtin:crash");
  CHECK(failed["last_failure"]["step_reached"] == 5);
}

TEST_CASE("Failures: a user failure rule wins over a built-in signature on the same output",
          "[integration][failures]") {
  TempDir dir;
  TpudProcess tpud(dir, ShellJob("data",
                                 "echo 'tensorflow.python.framework.errors_impl.DeadlineExceededError: "
                                 "Deadline Exceeded'; echo 'ShardMissingError: gs://b/shard-7'; exit 1",
                                 "  failure_rules:\n"
                                 "    - {match: 'ShardMissingError', class: user_error, action: fail,\n"
                                 "       hint: 'regenerate the missing shard'}\n" +
                                     std::string(kQuickRestarts)));
  REQUIRE(tpud.Tpuctl({"start", "data"}).exit_code == 0);
  const json failed = tpud.WaitForState("data", "failed");
  REQUIRE(failed["state"] == "failed");
  CHECK(failed["attempt"] == 1);
  CHECK(failed["last_failure"]["class"] == "user_error");
  CHECK(failed["last_failure"]["rule"] == "user:0");
  CHECK(failed["last_failure"]["hint"] == "regenerate the missing shard");
  CHECK(failed["last_failure"]["matched_line"] == "ShardMissingError: gs://b/shard-7");
}

}  // namespace tpud::testing
