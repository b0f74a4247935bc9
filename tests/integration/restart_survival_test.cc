// tpud going away (SIGKILL, crash, upgrade) never touches training, and a new
// tpud carries on where the old one stopped: same attempts, same counters,
// same incidents.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <regex>

#include "tests/integration/harness.h"
#include "tests/integration/processes.h"

namespace tpud::testing {
namespace {

using nlohmann::json;

// Counts from its checkpoint step, "saving" every 10 counts, until the file
// stop-now appears; the first attempt then exits 3, later ones exit 0.
std::string CounterJob(const TempDir& dir) {
  const std::string d = dir.path().string();
  return R"(
- name: counter
  command: [/bin/sh, -c, 'i=${TPUD_CHECKPOINT_STEP:-0}; echo "attempt $TPUD_ATTEMPT from ${TPUD_CHECKPOINT_STEP:-none}"; while [ ! -e stop-now ]; do echo "count $i"; [ $((i % 10)) -eq 0 ] && touch ckpt/ckpt-$i.pt; i=$((i+1)); sleep 0.05; done; [ "$TPUD_ATTEMPT" = 1 ] && exit 3; exit 0']
  working_dir: )" + YamlQuote(d) + R"(
  checkpoint: {dir: )" + YamlQuote(d + "/ckpt") + R"(, layout: pattern, pattern: 'ckpt-(\d+)\.pt$'}
  start_seconds: 0.2
  restart: {backoff_initial_seconds: 0.1}
)";
}

constexpr char kKeepJobs[] = "stop_jobs_on_exit: false";

std::vector<long> Counts(const std::string& log) {
  std::vector<long> counts;
  static const std::regex kCount(R"(^count (\d+)$)");
  for (const std::string& line : Lines(log)) {
    std::smatch m;
    if (std::regex_match(line, m, kCount)) counts.push_back(std::stol(m[1]));
  }
  return counts;
}

// SIGKILLs tpud (no handler runs, as in a crash) and reaps it.
void Crash(TpudProcess& tpud) {
  REQUIRE(::kill(tpud.pid(), SIGKILL) == 0);
  tpud.Shutdown();
}

TEST_CASE("tpud: training survives a SIGKILLed tpud, the new tpud re-attaches with no log gap, "
          "and a later failure restarts from the checkpoint", "[integration][survival]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "ckpt");
  const std::filesystem::path log = dir.path() / "logs" / "counter.log";
  auto first = std::make_unique<TpudProcess>(dir, CounterJob(dir), kKeepJobs);
  REQUIRE(first->Tpuctl({"start", "counter"}).exit_code == 0);
  REQUIRE(WaitFor([&] { return Counts(ReadFile(log)).size() >= 15; }, Seconds(10)));
  const int pid = first->Status("counter")["pid"].get<int>();

  Crash(*first);
  const std::size_t at_crash = Counts(ReadFile(log)).size();
  // Nobody is attached; the trainer keeps running and its log keeps growing.
  REQUIRE(WaitFor([&] { return Counts(ReadFile(log)).size() >= at_crash + 10; }, Seconds(10)));
  CHECK(::kill(pid, 0) == 0);

  auto second = std::make_unique<TpudProcess>(dir, CounterJob(dir), kKeepJobs);
  const json reattached = second->Status("counter");
  CHECK(reattached["state"] == "running");
  CHECK(reattached["pid"] == pid);
  CHECK(reattached["attempt"] == 1);

  std::ofstream(dir.path() / "stop-now").close();
  const json done = second->WaitForState("counter", "succeeded", Seconds(15));
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 2);
  CHECK(done["restarts"] == 1);
  const std::string text = ReadFile(log);
  const std::vector<long> counts = Counts(text);
  REQUIRE(counts.size() > at_crash + 10);
  for (std::size_t i = 1; i < counts.size(); ++i) {
    INFO("count " << counts[i - 1] << " is followed by count " << counts[i]);
    REQUIRE(counts[i] == counts[i - 1] + 1);  // No gap, no repeat: one attempt's output.
  }
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex(R"(attempt 2 from (\d+))")));
  CHECK(std::stol(m[1]) >= 10);  // Resumed from a checkpoint written before the failure.
  second.reset();
  first.reset();
}

TEST_CASE("tpud: a job that exits while tpud is down is restarted by the next tpud from its "
          "exit status", "[integration][survival]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "ckpt");
  auto first = std::make_unique<TpudProcess>(dir, CounterJob(dir), kKeepJobs);
  REQUIRE(first->Tpuctl({"start", "counter"}).exit_code == 0);
  REQUIRE(WaitFor([&] { return Counts(ReadFile(dir.path() / "logs" / "counter.log")).size() >= 12; },
                  Seconds(10)));
  const int pid = first->Status("counter")["pid"].get<int>();
  Crash(*first);
  std::ofstream(dir.path() / "stop-now").close();
  REQUIRE(WaitFor([&] { ReapOrphans(); return ProcessGone(pid); }, Seconds(10)));

  auto second = std::make_unique<TpudProcess>(dir, CounterJob(dir), kKeepJobs);
  const json done = second->WaitForState("counter", "succeeded", Seconds(15));
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["attempt"] == 2);
  CHECK(done["restarts"] == 1);
  bool saw_exit_3 = false;
  for (const json& event : second->Events("counter")) {
    if (event.value("type", "") == "incident" && event.dump().find("exit code 3") != std::string::npos) {
      saw_exit_3 = true;
    }
  }
  CHECK(saw_exit_3);  // The exit code tpud learned from the shim's exit.json.
  second.reset();
  first.reset();
}

TEST_CASE("tpud: killed while a job is in backoff, the next tpud keeps its restart count and "
          "incidents and carries on", "[integration][survival]") {
  TempDir dir;
  const std::string job = R"(
- name: flaky
  command: [/bin/sh, -c, 'echo "attempt $TPUD_ATTEMPT"; exit 3']
  start_seconds: 0
  restart: {max_restarts: 2, backoff_initial_seconds: 3, backoff_jitter: 0}
)";
  auto first = std::make_unique<TpudProcess>(dir, job, kKeepJobs);
  REQUIRE(first->Tpuctl({"start", "flaky"}).exit_code == 0);
  const json backoff = first->WaitForState("flaky", "backoff");
  REQUIRE(backoff["state"] == "backoff");
  REQUIRE(backoff["restarts"] == 1);
  Crash(*first);

  auto second = std::make_unique<TpudProcess>(dir, job, kKeepJobs);
  const json restored = second->Status("flaky");
  CHECK(restored["restarts"].get<int>() >= 1);
  CHECK(restored["attempt"].get<int>() >= 1);
  int incidents = 0;
  for (const json& event : second->Events("flaky")) incidents += event.value("type", "") == "incident";
  CHECK(incidents >= 1);  // The first failure's incident came back from the state store.
  const json failed = second->WaitForState("flaky", "failed", Seconds(20));
  REQUIRE(failed["state"] == "failed");
  CHECK(failed["attempt"] == 3);   // It carried on from attempt 1, not from scratch...
  CHECK(failed["restarts"] == 2);  // ...and the budget it had used still counted.
  second.reset();
  first.reset();
}

}  // namespace
}  // namespace tpud::testing
