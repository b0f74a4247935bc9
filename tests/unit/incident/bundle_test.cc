// Incident bundles on disk: what a bundle holds, redaction, the log tail,
// kernel log records, the bounds, retention, and reading bundles back. The
// stacks of a real hung process are tested in tests/integration/incident_test.cc.
#include "daemon/incident/bundle.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/sleeping_child.h"
#include "tests/support/temp_dir.h"

namespace tpud::incident {
namespace {

using testing::SleepingChild;
using testing::TempDir;

CaptureRequest ExitRequest(const TempDir& dir, std::int64_t number) {
  CaptureRequest request;
  request.job = "digits";
  request.number = number;
  request.attempt = 3;
  request.trigger = "exit";
  request.reason = "exit code 1";
  request.failure_class = "hbm_oom";
  request.action = "fail";
  request.hint = "reduce the batch size";
  request.deciding_line = "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm.";
  request.rule = "builtin:hbm_oom";
  request.log_path = dir / "digits.log";
  request.env = {{"PATH", "/usr/bin"}, {"HF_TOKEN", "hf_abc"}, {"WANDB_API_KEY", "k"}, {"db_password", "p"}};
  request.attempt_started_monotonic = std::chrono::microseconds(5'000'000);
  request.tpu = "state: READY\nhealth: HEALTHY\n";
  request.owner_uid = 0;  // A job of root (no `user:`).
  return request;
}

CaptureOptions Options(const TempDir& dir) {
  CaptureOptions options;
  options.dir = dir / "incidents";
  options.kmsg = dir / "kmsg";
  options.dmesg_restrict = dir / "dmesg_restrict";  // Absent: restricted.
  options.eu_stack = "/nonexistent/eu-stack";
  return options;
}

TEST_CASE("Bundle: an exit bundle holds the log tail, the verdict, the redacted env, the TPU and dmesg since start",
          "[bundle]") {
  TempDir dir;
  std::string log;
  for (int i = 1; i <= 300; ++i) log += "line " + std::to_string(i) + "\n";
  dir.WriteFile("digits.log", log);
  dir.WriteFile("kmsg", "6,1,1000000,-;before the attempt\n"
                        "3,2,6000000,-;tpu_common: accel0 fatal error\n"
                        " SUBSYSTEM=pci\n"
                        "4,3,7500000,-;oom-kill:constraint=CONSTRAINT_NONE\n");
  absl::StatusOr<CaptureResult> result = Capture(ExitRequest(dir, 4), Options(dir));
  REQUIRE(result.ok());
  CHECK(result->dir == dir / "incidents/digits/4");
  const std::string tail = dir.Read("incidents/digits/4/log-tail.txt");
  CHECK(tail.rfind("line 101\n", 0) == 0);  // The last 200 lines.
  CHECK(tail.find("line 300\n") != std::string::npos);
  CHECK(tail.find("line 100\n") == std::string::npos);
  const std::string env = dir.Read("incidents/digits/4/env.txt");
  CHECK(env.find("PATH=/usr/bin\n") != std::string::npos);
  CHECK(env.find("HF_TOKEN=<redacted>\n") != std::string::npos);
  CHECK(env.find("WANDB_API_KEY=<redacted>\n") != std::string::npos);
  CHECK(env.find("db_password=<redacted>\n") != std::string::npos);
  CHECK(env.find("hf_abc") == std::string::npos);
  CHECK(dir.Read("incidents/digits/4/tpu.txt") == "state: READY\nhealth: HEALTHY\n");
  CHECK(dir.Read("incidents/digits/4/dmesg.txt") ==
        "[    6.000000] tpu_common: accel0 fatal error\n[    7.500000] oom-kill:constraint=CONSTRAINT_NONE\n");
  CHECK_FALSE(std::filesystem::exists(dir / "incidents/digits/4/stacks.txt"));  // Nothing was alive.

  const nlohmann::json summary = nlohmann::json::parse(dir.Read("incidents/digits/4/summary.json"));
  CHECK(summary["job"] == "digits");
  CHECK(summary["incident"] == 4);
  CHECK(summary["attempt"] == 3);
  CHECK(summary["trigger"] == "exit");
  CHECK(summary["verdict"]["class"] == "hbm_oom");
  CHECK(summary["verdict"]["line"] == "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm.");
  CHECK(summary["processes"].empty());
  CHECK(summary["notes"].empty());
}

TEST_CASE("Bundle: what cannot be captured is named in the notes, never an error", "[bundle]") {
  TempDir dir;
  CaptureRequest request = ExitRequest(dir, 1);
  request.trigger = "hang";
  request.pid = 999999999;  // No such process.
  absl::StatusOr<CaptureResult> result = Capture(request, Options(dir));  // No log, no kmsg either.
  REQUIRE(result.ok());
  const nlohmann::json summary = nlohmann::json::parse(dir.Read("incidents/digits/1/summary.json"));
  const std::string notes = summary["notes"].dump();
  CHECK(notes.find("no process of the attempt was alive") != std::string::npos);
  CHECK(notes.find("log tail: nothing readable in " + (dir / "digits.log").string()) != std::string::npos);
  CHECK(notes.find("dmesg: " + (dir / "kmsg").string()) != std::string::npos);
}

TEST_CASE("Bundle: an unwritable incidents dir is an error that names it", "[bundle]") {
  TempDir dir;
  dir.WriteFile("incidents", "a file, not a directory");
  absl::StatusOr<CaptureResult> result = Capture(ExitRequest(dir, 1), Options(dir));
  REQUIRE_FALSE(result.ok());
  CHECK(std::string(result.status().message()).find((dir / "incidents/digits/1").string()) != std::string::npos);
}

TEST_CASE("Bundle: the newest `keep` bundles of a job are kept, other jobs' untouched", "[bundle]") {
  TempDir dir;
  CaptureOptions options = Options(dir);
  options.keep = 3;
  dir.WriteFile("incidents/other/1/summary.json", "{}");
  for (int n = 1; n <= 5; ++n) REQUIRE(Capture(ExitRequest(dir, n), options).ok());
  CHECK(ListBundles(options.dir, "digits") == std::vector<std::int64_t>{3, 4, 5});
  CHECK(ListBundles(options.dir, "other") == std::vector<std::int64_t>{1});
}

TEST_CASE("Bundle: directories are 0700 and files 0600, tpud's alone", "[bundle]") {
  TempDir dir;
  REQUIRE(Capture(ExitRequest(dir, 1), Options(dir)).ok());
  const auto mode = [&](const std::string& relative) {
    return std::filesystem::status(dir / relative).permissions() & std::filesystem::perms::all;
  };
  CHECK(mode("incidents") == std::filesystem::perms(0700));
  CHECK(mode("incidents/digits") == std::filesystem::perms(0700));
  CHECK(mode("incidents/digits/1") == std::filesystem::perms(0700));
  CHECK(mode("incidents/digits/1/env.txt") == std::filesystem::perms(0600));
  CHECK(mode("incidents/digits/1/summary.json") == std::filesystem::perms(0600));
}

TEST_CASE("Bundle: the kernel log is captured for root's jobs, or for anyone's with dmesg_restrict off", "[bundle]") {
  TempDir dir;
  dir.WriteFile("kmsg", "3,2,6000000,-;tpu_common: accel0 fatal error\n");
  CaptureRequest member = ExitRequest(dir, 1);
  member.owner_uid = 1000;
  absl::StatusOr<CaptureResult> restricted = Capture(member, Options(dir));
  REQUIRE(restricted.ok());
  CHECK_FALSE(std::filesystem::exists(dir / "incidents/digits/1/dmesg.txt"));
  CHECK_THAT(dir.Read("incidents/digits/1/summary.json"),
             Catch::Matchers::Contains("kernel.dmesg_restrict is on and the job runs as uid 1000"));

  REQUIRE(Capture(ExitRequest(dir, 2), Options(dir)).ok());  // root's job
  CHECK_THAT(dir.Read("incidents/digits/2/dmesg.txt"), Catch::Matchers::Contains("accel0 fatal error"));

  dir.WriteFile("dmesg_restrict", "0\n");
  member.number = 3;
  REQUIRE(Capture(member, Options(dir)).ok());
  CHECK_THAT(dir.Read("incidents/digits/3/dmesg.txt"), Catch::Matchers::Contains("accel0 fatal error"));
}

TEST_CASE("Bundle: the owner a bundle was captured for is read back, and a bundle without one is root's", "[bundle]") {
  TempDir dir;
  CaptureRequest request = ExitRequest(dir, 1);
  request.owner_uid = 1000;
  REQUIRE(Capture(request, Options(dir)).ok());
  absl::StatusOr<Bundle> bundle = ReadBundle(dir / "incidents", "digits", 1);
  REQUIRE(bundle.ok());
  CHECK(bundle->owner_uid == std::optional<std::uint32_t>(1000));
  dir.WriteFile("incidents/digits/2/summary.json", R"({"job": "digits"})");
  bundle = ReadBundle(dir / "incidents", "digits", 2);
  REQUIRE(bundle.ok());
  CHECK_FALSE(bundle->owner_uid.has_value());
}

TEST_CASE("Bundle: a variable the spec lists in unredacted_env is shown as it is", "[bundle]") {
  const auto shown = RedactEnv({{"WANDB_RUN_KEY", "run-42"}, {"HF_TOKEN", "hf_abc"}}, {"WANDB_RUN_KEY"});
  CHECK(shown.at("WANDB_RUN_KEY") == "run-42");
  CHECK(shown.at("HF_TOKEN") == "<redacted>");
}

TEST_CASE("Bundle: ReadBundle finds the newest or a numbered bundle and lists its files", "[bundle]") {
  TempDir dir;
  const CaptureOptions options = Options(dir);
  dir.WriteFile("digits.log", "hello\n");
  REQUIRE(Capture(ExitRequest(dir, 2), options).ok());
  REQUIRE(Capture(ExitRequest(dir, 7), options).ok());
  absl::StatusOr<Bundle> newest = ReadBundle(options.dir, "digits", 0);
  REQUIRE(newest.ok());
  CHECK(newest->number == 7);
  CHECK(nlohmann::json::parse(newest->summary_json)["incident"] == 7);
  std::vector<std::string> names;
  for (const BundleFile& file : newest->files) names.push_back(file.name);
  CHECK(names == std::vector<std::string>{"env.txt", "log-tail.txt", "summary.json", "tpu.txt"});
  CHECK(ReadBundle(options.dir, "digits", 2)->number == 2);
  CHECK(ReadBundle(options.dir, "digits", 3).status().message() == "job \"digits\" has no incident bundle 3");
  CHECK(ReadBundle(options.dir, "nope", 0).status().message() == "job \"nope\" has no incident bundle");
}

TEST_CASE("Bundle: a link planted in a bundle is neither listed nor followed", "[bundle]") {
  TempDir dir;
  const CaptureOptions options = Options(dir);
  dir.WriteFile("digits.log", "hello\n");
  REQUIRE(Capture(ExitRequest(dir, 1), options).ok());
  const std::string secret = dir.WriteFile("root-only/secret", "the root-only secret").string();
  const std::filesystem::path bundle_dir = options.dir / "digits" / "1";
  std::filesystem::create_symlink(secret, bundle_dir / "stacks-link.txt");
  absl::StatusOr<Bundle> bundle = ReadBundle(options.dir, "digits", 1);
  REQUIRE(bundle.ok());
  for (const BundleFile& file : bundle->files) CHECK(file.name != "stacks-link.txt");
  absl::StatusOr<std::string> linked = ReadBundleFile(*bundle, "stacks-link.txt", 1 << 20);
  REQUIRE_FALSE(linked.ok());
  CHECK(linked.status().code() == absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> summary = ReadBundleFile(*bundle, "summary.json", 1 << 20);
  REQUIRE(summary.ok());
  CHECK(nlohmann::json::parse(*summary)["incident"] == 1);
}

TEST_CASE("Bundle: the log tail reads only the end of a large log", "[bundle]") {
  TempDir dir;
  std::string log(3 << 20, 'x');
  log += "\nlast words\n";
  dir.WriteFile("big.log", log);
  const std::string tail = TailLines(dir / "big.log", 200, kMaxLogTailBytes);
  CHECK(tail.size() <= kMaxLogTailBytes);
  CHECK(tail == "last words\n");  // The cut first line is dropped, not half-kept.
  CHECK(TailLines(dir / "missing.log", 200, kMaxLogTailBytes).empty());
  dir.WriteFile("short.log", "a\nb");
  CHECK(TailLines(dir / "short.log", 1, 1000) == "b\n");
}

TEST_CASE("Bundle: kmsg records are filtered by time and malformed ones skipped", "[bundle]") {
  const std::vector<std::string> records = {"6,1,100,-;early", "garbage", "6,2,x,-;bad time", "4,3,2500000,c;late",
                                            " CONT=1"};
  CHECK(FormatKmsgRecords(records, std::chrono::microseconds(200)) == "[    2.500000] late\n");
  CHECK(FormatKmsgRecords(records, std::nullopt) == "[    0.000100] early\n[    2.500000] late\n");
}

TEST_CASE("Bundle: secret-looking names are redacted whatever their case", "[bundle]") {
  const auto redacted = RedactEnv({{"GITHUB_TOKEN", "t"}, {"aws_secret_access_key", "s"}, {"GOOGLE_APPLICATION_CREDENTIALS", "/k.json"},
                                   {"HOME", "/root"}, {"MONKEY", "m"}});
  CHECK(redacted.at("GITHUB_TOKEN") == "<redacted>");
  CHECK(redacted.at("aws_secret_access_key") == "<redacted>");
  CHECK(redacted.at("GOOGLE_APPLICATION_CREDENTIALS") == "<redacted>");
  CHECK(redacted.at("HOME") == "/root");
  CHECK(redacted.at("MONKEY") == "<redacted>");  // "KEY" inside a name: redacted rather than leaked.
}

TEST_CASE("Bundle: secrets are redacted by their value too, whatever the variable's name", "[bundle]") {
  const std::map<std::string, std::string> planted = {
      {"DATABASE_URL", "postgres://app:hunter2@db.internal:5432/prod"},
      {"https_proxy", "http://alice:s3cret@proxy:3128"},
      {"GH_PAT", "short"},
      {"AUTHORIZATION", "x"},
      {"UPSTREAM", "Bearer abc.def.ghi"},
      {"CI_JOB", "ghp_0123456789abcdefABCDEF0123456789abcd"},
      {"SLACK_HOOK_ID", "xoxb-1234-5678"},
      {"STORE", "AKIAIOSFODNN7EXAMPLE"},
      {"RANDOM_BLOB", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg9"},
      {"DB_PASS", "p"},
  };
  for (const auto& [name, value] : RedactEnv(planted)) {
    INFO(name);
    CHECK(value == "<redacted>");
  }
  // What a job needs to be debugged stays readable.
  const auto kept = RedactEnv({{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                               {"XLA_FLAGS", "--xla_dump_to=/tmp/xla --xla_dump_hlo_as_text"},
                               {"TPUD_CHECKPOINT", "/ckpt/orbax/checkpoint_00001200"},
                               {"PJRT_DEVICE", "TPU"},
                               {"RUN_DIR", "/home/user/experiments/run_2024_01_15_baseline/checkpoints"},
                               {"PROXY_HOST", "http://proxy:3128"}});
  CHECK(kept.at("PATH") == "/usr/local/bin:/usr/bin:/bin");
  CHECK(kept.at("XLA_FLAGS") == "--xla_dump_to=/tmp/xla --xla_dump_hlo_as_text");
  CHECK(kept.at("TPUD_CHECKPOINT") == "/ckpt/orbax/checkpoint_00001200");
  CHECK(kept.at("PJRT_DEVICE") == "TPU");
  CHECK(kept.at("RUN_DIR") == "/home/user/experiments/run_2024_01_15_baseline/checkpoints");
  CHECK(kept.at("PROXY_HOST") == "http://proxy:3128");
}

}  // namespace
TEST_CASE("Bundle: the log tail of something that is not a readable file is empty, not an error", "[bundle]") {
  TempDir dir;
  CHECK(TailLines(dir.Dir("a-directory"), 200, 1 << 20).empty());
  CHECK(TailLines(dir / "missing", 200, 1 << 20).empty());
  CHECK(TailLines(dir.WriteFile("empty", ""), 200, 1 << 20).empty());
  CHECK(TailLines("/dev/null", 200, 1 << 20).empty());
}

TEST_CASE("Bundle: a bundle already complete for the number is moved aside, never overwritten", "[bundle]") {
  TempDir dir;
  const CaptureOptions options = Options(dir);
  REQUIRE(Capture(ExitRequest(dir, 1), options).ok());
  CaptureRequest again = ExitRequest(dir, 1);
  again.attempt = 4;
  absl::StatusOr<CaptureResult> result = Capture(again, options);
  REQUIRE(result.ok());
  CHECK(nlohmann::json::parse(dir.Read("incidents/digits/1/summary.json"))["attempt"] == 4);
  std::vector<std::filesystem::path> aside;
  for (const auto& entry : std::filesystem::directory_iterator(options.dir / "digits")) {
    if (entry.path().filename().string().rfind("1.replaced-", 0) == 0) aside.push_back(entry.path());
  }
  REQUIRE(aside.size() == 1);
  const std::string kept = dir.Read((aside[0] / "summary.json").lexically_relative(dir.path()).string());
  CHECK(nlohmann::json::parse(kept)["attempt"] == 3);
  CHECK(nlohmann::json::parse(dir.Read("incidents/digits/1/summary.json"))["notes"].dump().find(aside[0].string()) !=
        std::string::npos);
  CHECK(ListBundles(options.dir, "digits") == std::vector<std::int64_t>{1});
}

TEST_CASE("Bundle: no stacks are taken past the deadline, the time of the Job's stop signal", "[bundle]") {
  TempDir dir;
  SleepingChild child;
  REQUIRE(child.WaitAsleep());  // Not in D: its stacks are asked for.
  const std::filesystem::path ran = dir / "eu-stack-ran";
  const std::filesystem::path eu_stack = dir.WriteFile("eu-stack", "#!/bin/sh\ntouch " + ran.string() + "\n");
  std::filesystem::permissions(eu_stack, std::filesystem::perms::owner_all);
  CaptureOptions options = Options(dir);
  options.eu_stack = eu_stack.string();
  options.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  CaptureRequest request = ExitRequest(dir, 1);
  request.trigger = "hang";
  request.pid = child.pid();
  absl::StatusOr<CaptureResult> result = Capture(request, options);
  REQUIRE(result.ok());
  CHECK_FALSE(std::filesystem::exists(ran));
  CHECK(std::filesystem::exists(dir / ("incidents/digits/1/proc/" + std::to_string(child.pid()) + "/wchan")));
  CHECK(nlohmann::json::parse(dir.Read("incidents/digits/1/summary.json"))["notes"].dump().find(
            "ran out before pid " + std::to_string(child.pid())) != std::string::npos);

  // Before the deadline the same capture runs it.
  options.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  request.number = 2;
  REQUIRE(Capture(request, options).ok());
  CHECK(std::filesystem::exists(ran));
}

}  // namespace tpud::incident
