// The life of a job through tpuctl: start, status, logs, stop (and its signal
// ladder), automatic restarts, ad hoc jobs, daemon shutdown.
#include <signal.h>

#include <catch2/catch.hpp>
#include <regex>
#include <sstream>

#include "tests/integration/harness.h"
#include "tests/integration/processes.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using json = nlohmann::json;

// Prints 8 numbered lines, then idles with short-lived children.
constexpr char kCounterJob[] = R"(
- name: counter
  command: [/bin/sh, -c, 'i=1; while [ $i -le 8 ]; do echo "line $i"; i=$((i+1)); done; while :; do sleep 0.1; done']
  start_seconds: 0.2
)";

// The whitespace-separated cells of `job`'s row in the `tpuctl status` table.
std::vector<std::string> TableRow(const std::string& table, const std::string& job) {
  for (const std::string& line : Lines(table)) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) row.push_back(cell);
    if (!row.empty() && row[0] == job) return row;
  }
  return {};
}

// "from -> to" of each line of `tpuctl events`.
std::vector<std::string> Transitions(const std::string& events_text) {
  static const std::regex kTransition(R"((\w+) -> (\w+))");
  std::vector<std::string> out;
  for (const std::string& line : Lines(events_text)) {
    std::smatch match;
    if (std::regex_search(line, match, kTransition)) out.push_back(match[0]);
  }
  return out;
}

// Waits (bounded) until no process of group `pgid` remains.
void CheckGroupGone(int pgid) {
  const bool gone = WaitFor([&] { return ProcessGroupGone(pgid); }, Seconds(2));
  INFO("left in process group " << pgid << ": " << DescribeProcessGroup(pgid));
  CHECK(gone);
}

int RunningPid(const TpudProcess& tpud, const std::string& job) {
  const json running = tpud.WaitForState(job, "running");
  REQUIRE(running["state"] == "running");
  REQUIRE(running["pid"].is_number_integer());
  return running["pid"].get<int>();
}

}  // namespace

TEST_CASE("tpud: a started job runs with a pid and its JSON status has every documented field",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, kCounterJob);
  const CommandResult started = tpud.Tpuctl({"start", "counter"});
  REQUIRE(started.exit_code == 0);
  CHECK_THAT(started.out, Contains("counter: starting"));

  const int pid = RunningPid(tpud, "counter");
  const json status = tpud.Status("counter");
  CHECK(status["name"] == "counter");
  CHECK(status["pid"] == pid);
  CHECK(status["attempt"] == 1);
  CHECK(status["restarts"] == 0);
  CHECK(status["last_exit"]["exited"] == false);
  CHECK(status["last_exit"]["code"].is_null());
  CHECK(status["last_exit"]["signal"].is_null());
  CHECK(status["checkpoint"]["path"].is_null());
  CHECK(status["checkpoint"]["step"].is_null());
  CHECK(::kill(-pid, 0) == 0);  // The pid is a live process group.

  const CommandResult table = tpud.Tpuctl({"status"});
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(Lines(table.out).at(0), Contains("NAME") && Contains("STATE") && Contains("PID"));
  const std::vector<std::string> row = TableRow(table.out, "counter");
  INFO("status table:\n" << table.out);
  REQUIRE(row.size() >= 3);
  CHECK(row[1] == "running");
  CHECK(row[2] == std::to_string(pid));
}

TEST_CASE("tpud: logs -n 3 prints the last 3 lines and stop ends the job by SIGINT, the ladder's "
          "first rung, leaving nothing behind", "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, kCounterJob);
  REQUIRE(tpud.Tpuctl({"start", "counter"}).exit_code == 0);
  const int pgid = RunningPid(tpud, "counter");
  REQUIRE(WaitFor([&] { return tpud.Logs("counter").find("line 8\n") != std::string::npos; },
                  Seconds(5)));
  const CommandResult tail = tpud.Tpuctl({"logs", "counter", "-n", "3"});
  CHECK(tail.exit_code == 0);
  CHECK(tail.out == "line 6\nline 7\nline 8\n");

  const CommandResult stop = tpud.Tpuctl({"stop", "counter"});
  REQUIRE(stop.exit_code == 0);
  const json stopped = tpud.WaitForState("counter", "stopped");
  REQUIRE(stopped["state"] == "stopped");
  CHECK(stopped["pid"].is_null());
  CHECK(stopped["last_exit"]["exited"] == true);
  CHECK(stopped["last_exit"]["signal"] == SIGINT);
  CHECK(stopped["last_exit"]["signal_name"] == "SIGINT");
  CHECK(stopped["last_exit"]["code"].is_null());
  CheckGroupGone(pgid);
}

TEST_CASE("tpud: a job ignoring SIGINT, SIGTERM and SIGQUIT is ended by the ladder's SIGKILL",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: stubborn
  command: [/bin/sh, -c, 'trap "" INT TERM QUIT; echo ready; while :; do sleep 0.1; done']
  start_seconds: 0.2
  stop: {grace_seconds: 1}
)");
  REQUIRE(tpud.Tpuctl({"start", "stubborn"}).exit_code == 0);
  const int pgid = RunningPid(tpud, "stubborn");
  REQUIRE(WaitFor([&] { return tpud.Logs("stubborn").find("ready") != std::string::npos; },
                  Seconds(5)));

  const auto stop_sent = std::chrono::steady_clock::now();
  const CommandResult stop = tpud.Tpuctl({"stop", "stubborn"});
  REQUIRE(stop.exit_code == 0);
  CHECK_THAT(stop.out, Contains("stubborn: stopping"));
  const json stopped = tpud.WaitForState("stubborn", "stopped");
  const Seconds took = std::chrono::steady_clock::now() - stop_sent;
  REQUIRE(stopped["state"] == "stopped");
  CHECK(took.count() >= 2.9);  // Three rungs ignored, grace_seconds apart.
  CHECK(stopped["last_exit"]["signal_name"] == "SIGKILL");
  CheckGroupGone(pgid);
}

TEST_CASE("tpud: stopping a job also ends the children it forked into its group",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: forker
  command: [/bin/sh, -c, '(trap "" INT TERM; exec sleep 300) & echo "child $!"; wait']
  start_seconds: 0.2
  stop: {signals: [SIGTERM, SIGKILL]}
)");
  REQUIRE(tpud.Tpuctl({"start", "forker"}).exit_code == 0);
  const int pgid = RunningPid(tpud, "forker");
  std::smatch match;
  std::string logs;
  const std::regex kChild(R"(child (\d+))");
  REQUIRE(WaitFor([&] { logs = tpud.Logs("forker"); return std::regex_search(logs, match, kChild); },
                  Seconds(5)));
  const int child = std::stoi(match[1]);
  REQUIRE(::getpgid(child) == pgid);

  REQUIRE(tpud.Tpuctl({"stop", "forker"}).exit_code == 0);
  const json stopped = tpud.WaitForState("forker", "stopped");
  REQUIRE(stopped["state"] == "stopped");
  CHECK(stopped["last_exit"]["signal_name"] == "SIGTERM");  // The leader obeyed SIGTERM...
  const bool child_gone = WaitFor([&] { return ProcessGone(child); }, Seconds(2));
  CHECK(child_gone);  // ...its child, which ignores it, did not survive.
  CheckGroupGone(pgid);
}

TEST_CASE("tpud: a job that always fails is restarted max_restarts times then ends failed",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: flaky
  command: [/bin/sh, -c, 'exit 3']
  restart: {max_restarts: 2, backoff_initial_seconds: 0.1, backoff_jitter: 0}
)");
  REQUIRE(tpud.Tpuctl({"start", "flaky"}).exit_code == 0);
  const json failed = tpud.WaitForState("flaky", "failed");
  REQUIRE(failed["state"] == "failed");
  CHECK(failed["attempt"] == 3);
  CHECK(failed["restarts"] == 2);
  CHECK(failed["last_exit"]["code"] == 3);
  CHECK_THAT(failed["reason"].get<std::string>(), Contains("max_restarts"));

  const CommandResult events = tpud.Tpuctl({"events", "flaky"});
  REQUIRE(events.exit_code == 0);
  INFO("tpuctl events flaky:\n" << events.out);
  const std::vector<std::string> expected = {
      "stopped -> starting", "starting -> backoff", "backoff -> starting",
      "starting -> backoff", "backoff -> starting", "starting -> failed"};
  CHECK(Transitions(events.out) == expected);
  CHECK_THAT(Lines(events.out).back(), Contains("attempt=3") && Contains("code=3"));
}

TEST_CASE("tpud: an ad hoc job runs its argv with TPUD_JOB and TPUD_ATTEMPT set",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, "");
  const CommandResult start =
      tpud.Tpuctl({"start", "adhoc1", "--", "/bin/sh", "-c", "echo $TPUD_JOB $TPUD_ATTEMPT"});
  REQUIRE(start.exit_code == 0);
  const json done = tpud.WaitForState("adhoc1", "succeeded");
  REQUIRE(done["state"] == "succeeded");
  CHECK(done["origin"] == "adhoc");
  CHECK(done["last_exit"]["code"] == 0);
  CHECK_THAT(tpud.Logs("adhoc1"), Contains("adhoc1 1\n"));
}

TEST_CASE("tpud: on SIGTERM tpud stops its running jobs then exits 0 and removes its socket",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, kCounterJob);
  REQUIRE(tpud.Tpuctl({"start", "counter"}).exit_code == 0);
  const int pgid = RunningPid(tpud, "counter");
  CHECK(tpud.Shutdown() == 0);
  CHECK_FALSE(std::filesystem::exists(tpud.socket()));
  CheckGroupGone(pgid);
}

}  // namespace tpud::testing
