// `tpud classify`: the real binary, no daemon, on log files in a temp dir —
// the verdict with its deciding line, a job's failure_rules overriding the
// built-in rules, JSON output, and exit code 2 naming a bad file or spec.
#include <catch2/catch.hpp>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

CommandResult Classify(std::vector<std::string> args) {
  args.insert(args.begin(), {TPUD_BIN, "classify"});
  return RunCommand(args);
}

// A burst from jax-ml/jax#22070: the TPU is busy (INFO), so jax falls back to the CPU.
const char kBusyLog[] =
    "step=0 compiling\n"
    "INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend 'tpu': "
    "ABORTED: The TPU is already in use by process with pid 176028. Not attempting to load "
    "libtpu.so in this process.\n"
    "WARNING:2024-06-25 00:34:55,143:jax._src.xla_bridge:940: A Google TPU may be present on this "
    "machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu.\n";

}  // namespace

TEST_CASE("tpud classify: prints class, action, rule and the numbered deciding line",
          "[integration][classify]") {
  TempDir dir;
  const std::string log = dir.WriteFile("attempt-1.log", kBusyLog).string();
  const CommandResult result = Classify({log});
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK(result.err.empty());
  const std::vector<std::string> lines = Lines(result.out);
  REQUIRE(lines.size() >= 5);
  CHECK(lines[0] == log);
  CHECK(lines[1] == "  class:  device_busy");
  CHECK(lines[2] == "  action: reset_and_restart");
  CHECK(lines[3] == "  rule:   builtin:device_busy");
  CHECK_THAT(lines[4], StartsWith("  line 2: INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889:"));
}

TEST_CASE("tpud classify --job: the job's failure_rules decide first, and --json gives one object per log",
          "[integration][classify]") {
  TempDir dir;
  const std::string busy = dir.WriteFile("busy.log", kBusyLog).string();
  const std::string quiet = dir.WriteFile("quiet.log", "step=1\nstep=2\n").string();
  const std::string job = dir.WriteFile("job.yaml",
                                        "name: trainer\n"
                                        "command: [python3, train.py]\n"
                                        "failure_rules:\n"
                                        "  - match: 'Falling back to cpu'\n"
                                        "    class: cpu_fallback\n"
                                        "    action: fail\n"
                                        "    hint: install libtpu\n")
                              .string();
  const CommandResult result = Classify({"--job", job, "--json", "--exit-code", "7", busy, quiet});
  INFO("stderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = Lines(result.out);
  REQUIRE(lines.size() == 2);
  const json first = json::parse(lines[0]);
  CHECK(first["file"] == busy);
  CHECK(first["class"] == "cpu_fallback");
  CHECK(first["action"] == "fail");
  CHECK(first["rule"] == "user:0");
  CHECK(first["line_number"] == 3);
  CHECK(first["hint"] == "install libtpu");
  const json second = json::parse(lines[1]);
  CHECK(second["class"] == "unknown");
  CHECK(second["rule"] == "exit:code 7");
  CHECK(second["line_number"] == 0);
}

TEST_CASE("tpud classify: a missing log or a bad job spec exits 2 naming the file",
          "[integration][classify]") {
  TempDir dir;
  const std::string missing = (dir / "nope.log").string();
  CommandResult result = Classify({missing});
  CHECK(result.exit_code == 2);
  CHECK(result.err == "tpud classify: " + missing + ": cannot open: No such file or directory\n");

  const std::string log = dir.WriteFile("a.log", kBusyLog).string();
  const std::string bad = dir.WriteFile("bad.yaml", "name: trainer\ncommand: [x]\nfailure_rules:\n"
                                                    "  - {match: '(unclosed', class: crash}\n")
                              .string();
  result = Classify({"--job", bad, log});
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, StartsWith("tpud classify: " + bad));
  CHECK_THAT(result.err, Contains("failure_rules[0].match"));
}

TEST_CASE("tpud --check still validates a config beside the classify subcommand",
          "[integration][classify]") {
  TempDir dir;
  const std::string config = dir.WriteFile("tpud.yaml", "state_dir: " + YamlQuote((dir / "s").string()) +
                                                            "\n")
                                 .string();
  const CommandResult result = RunCommand({TPUD_BIN, "--config", config, "--check"});
  CHECK(result.exit_code == 0);
  CHECK(result.out == config + ": OK (0 job(s))\n");
}

}  // namespace tpud::testing
