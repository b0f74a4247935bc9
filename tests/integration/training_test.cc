// The bundled PyTorch job (examples/digits/train.py) under tpud: a crash
// resumes from the newest checkpoint and ends bit-identical to an
// uninterrupted run.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <regex>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using json = nlohmann::json;

constexpr char kPython[] = "/usr/bin/python3";
const std::string kTrainPy = std::string(TPUD_SOURCE_DIR) + "/examples/digits/train.py";
// 300 steps, a checkpoint every 50: several checkpoints before the end.
const std::vector<std::string> kTrainArgs = {"--steps", "300", "--ckpt-every", "50"};

std::string YamlList(const std::vector<std::string>& words) {
  std::string out = "[";
  for (const std::string& word : words) out += (out.size() > 1 ? ", " : "") + YamlQuote(word);
  return out + "]";
}

// The job spec: slowed by --step-sleep so it can be killed mid-way.
std::string DigitsJob(const fs::path& ckpt_dir, const fs::path& result_file) {
  std::vector<std::string> command = {kPython, kTrainPy, "--ckpt-dir", ckpt_dir.string()};
  command.insert(command.end(), kTrainArgs.begin(), kTrainArgs.end());
  for (const char* arg : {"--step-sleep", "0.01", "--result-file"}) command.push_back(arg);
  command.push_back(result_file.string());
  return "- name: digits\n"
         "  command: " + YamlList(command) + "\n"
         "  env: {PYTHONUNBUFFERED: \"1\"}\n"
         "  start_seconds: 0.5\n"
         "  checkpoint: {dir: " + YamlQuote(ckpt_dir.string()) +
         ", layout: pattern, pattern: 'ckpt-(\\d+)\\.pt$'}\n"
         "  resume_args: [\"--resume-from\", \"{checkpoint}\"]\n"
         "  restart: {max_restarts: 2, backoff_initial_seconds: 0.1, backoff_jitter: 0}\n";
}

// Runs train.py to the end without tpud; returns its final weights_sha256.
std::string ReferenceWeights(const TempDir& dir) {
  std::vector<std::string> argv = {kPython, kTrainPy, "--ckpt-dir", (dir / "ref-ckpt").string(),
                                   "--result-file", (dir / "ref.json").string()};
  argv.insert(argv.end(), kTrainArgs.begin(), kTrainArgs.end());
  const CommandResult run = RunCommand(argv, Seconds(120));
  INFO("reference run stderr:\n" << run.err);
  REQUIRE(run.exit_code == 0);
  return json::parse(ReadFile(dir / "ref.json"))["weights_sha256"].get<std::string>();
}

bool HasCheckpoint(const fs::path& dir) {
  static const std::regex kComplete(R"(ckpt-\d+\.pt)");
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (std::regex_match(entry.path().filename().string(), kComplete)) return true;
  }
  return false;
}

// The event that started attempt `attempt`.
json StartingEvent(const std::vector<json>& events, int attempt) {
  for (const json& event : events) {
    if (event.value("to", "") == "starting" && event["attempt"] == attempt) return event;
  }
  FAIL("no event into starting for attempt " << attempt);
  return {};
}

}  // namespace

TEST_CASE("tpud: a training run killed with SIGKILL resumes from its newest checkpoint and "
          "matches an uninterrupted run", "[integration]") {
  TempDir dir;
  const std::string reference = ReferenceWeights(dir);
  const fs::path ckpt_dir = dir / "ckpt";
  TpudProcess tpud(dir, DigitsJob(ckpt_dir, dir / "result.json"));
  REQUIRE(tpud.Tpuctl({"start", "digits"}).exit_code == 0);

  REQUIRE(WaitFor([&] { return HasCheckpoint(ckpt_dir); }, Seconds(60)));
  const json first = tpud.Status("digits");
  REQUIRE(first["attempt"] == 1);
  REQUIRE(first["pid"].is_number_integer());
  REQUIRE(::kill(first["pid"].get<int>(), SIGKILL) == 0);

  const json done = tpud.WaitForState("digits", "succeeded", Seconds(60));
  INFO("job log:\n" << tpud.Logs("digits"));
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 2);
  CHECK(done["restarts"] == 1);
  const json checkpoint = done["checkpoint"];
  REQUIRE(checkpoint["step"].is_number_integer());
  const int step = checkpoint["step"].get<int>();
  CHECK(step > 0);
  CHECK(checkpoint["path"] == (ckpt_dir / ("ckpt-" + std::to_string(step) + ".pt")).string());

  const std::vector<json> events = tpud.Events("digits");
  CHECK(StartingEvent(events, 1)["checkpoint"]["step"].is_null());
  CHECK(StartingEvent(events, 2)["checkpoint"] == checkpoint);
  const auto backoff = std::find_if(events.begin(), events.end(),
                                    [](const json& event) { return event.value("to", "") == "backoff"; });
  REQUIRE(backoff != events.end());
  CHECK((*backoff)["exit"]["signal_name"] == "SIGKILL");
  CHECK_THAT(tpud.Logs("digits"),
             Contains("resuming from " + checkpoint["path"].get<std::string>() +
                      " at step=" + std::to_string(step)));
  const json result = json::parse(ReadFile(dir / "result.json"));
  CHECK(result["weights_sha256"] == reference);
}

}  // namespace tpud::testing
