// Mistakes users make get one precise message and a documented exit code
// (client/tpuctl.h, daemon/config/config.h), and never take tpud down.
#include <catch2/catch.hpp>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

// A tpuctl failure: exactly one line on stderr, starting with "tpuctl: ".
void CheckOneErrorLine(const CommandResult& result) {
  INFO("stderr: " << result.err);
  CHECK(Lines(result.err).size() == 1);
  CHECK_THAT(result.err, StartsWith("tpuctl: "));
}

std::string DirsYaml(const TempDir& dir) {
  return "socket: " + YamlQuote((dir / "tpud.sock").string()) + "\n" +
         "state_dir: " + YamlQuote((dir / "state").string()) + "\n" +
         "log_dir: " + YamlQuote((dir / "logs").string()) + "\n";
}

}  // namespace

TEST_CASE("tpuctl: status of an unknown job exits 3 naming the job", "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, "");
  const CommandResult result = tpud.Tpuctl({"status", "nope"});
  CHECK(result.exit_code == 3);
  CheckOneErrorLine(result);
  CHECK_THAT(result.err, Contains("nope"));
  CHECK(result.out.empty());
}

TEST_CASE("tpuctl: a socket nobody serves exits 2 naming the socket", "[integration]") {
  const CommandResult result = RunTpuctl({"--socket", "/nonexistent/x.sock", "status"});
  CHECK(result.exit_code == 2);
  CheckOneErrorLine(result);
  CHECK_THAT(result.err, Contains("/nonexistent/x.sock"));
}

TEST_CASE("tpuctl: start -f with an unknown key exits 4 naming the file line and key",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, "");
  const auto spec = dir.WriteFile("bad.yaml",
                                  "name: badjob\n"
                                  "command: [/bin/true]\n"
                                  "restart:\n"
                                  "  max_restart: 2\n");
  const CommandResult result = tpud.Tpuctl({"start", "-f", spec.string()});
  CHECK(result.exit_code == 4);
  CheckOneErrorLine(result);
  CHECK_THAT(result.err, Contains(spec.string() + ":4:") && Contains("restart.max_restart"));
  CHECK(tpud.Tpuctl({"status", "badjob"}).exit_code == 3);  // Nothing was added.
}

TEST_CASE("tpud: a job whose binary does not exist fails naming it and tpud keeps serving",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: ghost
  command: [/no/such/binary, --flag]
- name: hello
  command: [/bin/echo, hello]
)");
  tpud.Tpuctl({"start", "ghost"});
  const json ghost = tpud.WaitForState("ghost", "failed");
  REQUIRE(ghost["state"] == "failed");
  CHECK_THAT(ghost["reason"].get<std::string>(), Contains("/no/such/binary"));
  CHECK(ghost["attempt"] == 1);  // A missing binary is not retried.

  REQUIRE(tpud.Tpuctl({"start", "hello"}).exit_code == 0);
  const json hello = tpud.WaitForState("hello", "succeeded");
  CHECK(hello["state"] == "succeeded");
  CHECK(tpud.Logs("hello") == "hello\n");
  CHECK(tpud.Tpuctl({"status"}).exit_code == 0);
}

TEST_CASE("tpud: a config with an unknown key is refused naming file line and key",
          "[integration]") {
  TempDir dir;
  const auto config = dir.WriteFile("tpud.yaml", DirsYaml(dir) +  // Lines 1-3.
                                                     "jobs:\n"
                                                     "- name: typo\n"
                                                     "  command: [/bin/true]\n"
                                                     "  autostrat: true\n");
  const CommandResult result = RunCommand({TPUD_BIN, "--config", config.string()});
  CHECK_FALSE(result.timed_out);
  CHECK(result.exit_code != 0);
  INFO("stderr: " << result.err);
  CHECK(Lines(result.err).size() == 1);
  CHECK_THAT(result.err, Contains(config.string() + ":7:") && Contains("autostrat"));
  CHECK_FALSE(std::filesystem::exists(dir / "tpud.sock"));
}

TEST_CASE("tpud: --check accepts a good config and exits 0 without serving", "[integration]") {
  TempDir dir;
  const auto config = dir.WriteFile("tpud.yaml", DirsYaml(dir) +
                                                     "metrics: {listen: \"127.0.0.1:0\"}\n"
                                                     "jobs:\n"
                                                     "- name: fine\n"
                                                     "  command: [/bin/true]\n");
  const CommandResult result = RunCommand({TPUD_BIN, "--check", "--config", config.string()});
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("OK (1 job(s))"));
  CHECK_FALSE(std::filesystem::exists(dir / "tpud.sock"));
}

}  // namespace tpud::testing
