// Adversarial tests, processes side: never two trainers at once, and a stop
// that always sticks. Each reproduces a defect seen on an earlier tpud (issue
// "Trust", D1, D2, D3, D6, D15) with the real binaries.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>

#include "tests/integration/adversity.h"
#include "tests/integration/harness.h"
#include "tests/integration/processes.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
namespace fs = std::filesystem;

// Every 20 ms appends its attempt number to beats; writes its pid to pid.N.
std::string BeatingJob(const TempDir& dir, const std::string& extra = "") {
  const std::string d = dir.path().string();
  return R"(
- name: beats
  command: [/bin/sh, -c, 'echo $$ > pid.$TPUD_ATTEMPT; while :; do echo $TPUD_ATTEMPT >> beats; sleep 0.02; done']
  working_dir: )" + YamlQuote(d) + R"(
  start_seconds: 0.2
  restart: {backoff_initial_seconds: 0.2}
  stop: {grace_seconds: 2}
)" + extra;
}

// The attempt numbers in beats, in order.
std::vector<int> Beats(const TempDir& dir) {
  std::vector<int> beats;
  for (const std::string& line : Lines(ReadFile(dir / "beats"))) {
    if (!line.empty()) beats.push_back(std::stoi(line));
  }
  return beats;
}

// No beat of an earlier attempt after the first beat of a later one: the
// attempts never overlapped.
bool NeverOverlapped(const std::vector<int>& beats) {
  int newest = 0;
  for (int attempt : beats) {
    if (attempt < newest) return false;
    newest = attempt;
  }
  return true;
}

int ShimPidOf(const TempDir& dir, int attempt) {
  const std::string state = ReadFile(dir / "state" / "attempts" / "beats" / std::to_string(attempt) / "state.json");
  const json parsed = json::parse(state, nullptr, false);
  return parsed.is_object() ? parsed.value("shim_pid", -1) : -1;
}

TEST_CASE("Adversarial: a second tpud on the same state_dir exits 1 at once and touches nothing",
          "[integration][adversarial]") {
  TempDir dir;
  TpudProcess first(dir, BeatingJob(dir), "stop_jobs_on_exit: false");
  REQUIRE(first.Tpuctl({"start", "beats"}).exit_code == 0);
  const json running = first.WaitForState("beats", "running");
  TempDir other;
  const fs::path config = other.WriteFile("tpud.yaml", "socket: " + (other / "tpud.sock").string() +
                                                           "\nstate_dir: " + (dir / "state").string() +
                                                           "\nlog_dir: " + (dir / "logs").string() +
                                                           "\nmetrics: {listen: \"\"}\n");
  const CommandResult second = RunCommand({TPUD_BIN, "--config", config.string()}, Seconds(10));
  CHECK(second.exit_code == 1);
  CHECK_THAT(second.err, Contains("state_dir " + (dir / "state").string() + " is in use by tpud (pid " +
                                  std::to_string(first.pid()) + ")"));
  CHECK_FALSE(fs::exists(other / "tpud.sock"));
  const json after = first.Status("beats");
  CHECK(after["state"] == "running");
  CHECK(after["pid"] == running["pid"]);
  CHECK(after["attempt"] == 1);
}

TEST_CASE("Adversarial: a shim refuses a second daemon connection while one is attached",
          "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, BeatingJob(dir));
  REQUIRE(tpud.Tpuctl({"start", "beats"}).exit_code == 0);
  tpud.WaitForState("beats", "running");
  const fs::path socket = dir / "state" / "attempts" / "beats" / "1" / "shim.sock";
  // A second client connects and is closed at once: it reads end of file.
  const CommandResult probe = RunCommand(
      {"python3", "-c",
       "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5); "
       "print('eof' if s.recv(64) == b'' else 'data')",
       socket.string()});
  CHECK(probe.out == "eof\n");
  CHECK_THAT(ReadFile(dir / "state" / "attempts" / "beats" / "1" / "shim.log"),
             Contains("refused a second daemon connection"));
  const std::size_t before = Beats(dir).size();
  REQUIRE(WaitFor([&] { return Beats(dir).size() > before + 5; }, Seconds(5)));
  CHECK(tpud.Status("beats")["attempt"] == 1);  // The attached daemon saw nothing happen.
}

TEST_CASE("Adversarial: kill -9 of a running attempt's shim: its trainer is gone before attempt 2 starts",
          "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, BeatingJob(dir));
  REQUIRE(tpud.Tpuctl({"start", "beats"}).exit_code == 0);
  tpud.WaitForState("beats", "running");
  const int trainer = PidFromFile(dir / "pid.1");
  const int shim = ShimPidOf(dir, 1);
  REQUIRE(shim > 0);
  REQUIRE(::kill(shim, SIGKILL) == 0);
  REQUIRE(WaitFor([&] { return tpud.Status("beats")["attempt"] == 2 && Beats(dir).back() == 2; }, Seconds(10)));
  CHECK_FALSE(Alive(trainer));
  CHECK(NeverOverlapped(Beats(dir)));
  const json status = tpud.Status("beats");
  CHECK_THAT(status["last_failure"]["exit"]["description"].get<std::string>(), Contains("died without an exit status"));
  // And stopped means nothing of the job is left.
  REQUIRE(tpud.Tpuctl({"stop", "beats"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("beats", "stopped")["state"] == "stopped");
  CHECK_FALSE(Alive(PidFromFile(dir / "pid.2")));
}

TEST_CASE("Adversarial: tpud and the shim both killed: the next tpud ends the orphan before restarting",
          "[integration][adversarial]") {
  TempDir dir;
  auto first = std::make_unique<TpudProcess>(dir, BeatingJob(dir), "stop_jobs_on_exit: false");
  REQUIRE(first->Tpuctl({"start", "beats"}).exit_code == 0);
  first->WaitForState("beats", "running");
  const int trainer = PidFromFile(dir / "pid.1");
  REQUIRE(::kill(first->pid(), SIGKILL) == 0);
  first->Shutdown();
  REQUIRE(::kill(ShimPidOf(dir, 1), SIGKILL) == 0);
  const std::size_t orphan_beats = Beats(dir).size();
  REQUIRE(WaitFor([&] { return Beats(dir).size() > orphan_beats + 3; }, Seconds(5)));  // Unsupervised, alive.
  TpudProcess second(dir, BeatingJob(dir), "stop_jobs_on_exit: false");
  REQUIRE(WaitFor([&] { return !Beats(dir).empty() && Beats(dir).back() == 2; }, Seconds(10)));
  CHECK_FALSE(Alive(trainer));
  CHECK(NeverOverlapped(Beats(dir)));
  CHECK_THAT(second.StderrText(), Contains("killing what is left of the attempt"));
}

TEST_CASE("Adversarial: a descendant that left the process group (setsid) dies with the attempt",
          "[integration][adversarial]") {
  TempDir dir;
  const std::string d = dir.path().string();
  // The escapee starts a session of its own, then its parent exits: it is
  // nobody's child but the shim's (a child subreaper).
  const std::string jobs = R"(
- name: escape
  command: [/bin/sh, -c, '(setsid sh -c "echo \$\$ > escapee.pid; exec sleep 1000" &); exec sleep 1000']
  working_dir: )" + YamlQuote(d) + R"(
  start_seconds: 0.2
  stop: {grace_seconds: 1}
)";
  TpudProcess tpud(dir, jobs);
  REQUIRE(tpud.Tpuctl({"start", "escape"}).exit_code == 0);
  tpud.WaitForState("escape", "running");
  REQUIRE(WaitFor([&] { return Alive(PidFromFile(dir / "escapee.pid")); }, Seconds(5)));
  const int escapee = PidFromFile(dir / "escapee.pid");
  REQUIRE(::getsid(escapee) == escapee);  // Out of the attempt's session and process group.
  REQUIRE(tpud.Tpuctl({"stop", "escape"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("escape", "stopped")["state"] == "stopped");
  CHECK_FALSE(Alive(escapee));
}

TEST_CASE("Adversarial: with attempt cgroups, every process of the attempt is in its cgroup and ends with it",
          "[integration][adversarial]") {
  const fs::path unified = "/sys/fs/cgroup/unified";
  const fs::path root = unified / ("tpud-test-" + std::to_string(::getpid()));
  if (::geteuid() != 0 || ::access((unified / "cgroup.kill").c_str(), F_OK) != 0 ||
      ::mkdir(root.c_str(), 0755) != 0) {
    WARN("needs a writable cgroup v2 hierarchy at " << unified << ": skipped");
    return;
  }
  TempDir dir;
  const std::string d = dir.path().string();
  const std::string jobs = R"(
- name: grouped
  command: [/bin/sh, -c, '(setsid sh -c "echo \$\$ > escapee.pid; exec sleep 1000" &); exec sleep 1000']
  working_dir: )" + YamlQuote(d) + R"(
  start_seconds: 0.2
  stop: {grace_seconds: 1}
)";
  {
    TpudProcess tpud(dir, jobs, "cgroup_root: " + root.string());
    CHECK(tpud.Info()["attempt_cgroups"] == root.string());
    REQUIRE(tpud.Tpuctl({"start", "grouped"}).exit_code == 0);
    const json running = tpud.WaitForState("grouped", "running");
    REQUIRE(WaitFor([&] { return Alive(PidFromFile(dir / "escapee.pid")); }, Seconds(5)));
    const std::string procs = ReadFile(root / "grouped" / "1" / "cgroup.procs");
    CHECK_THAT(procs, Contains(std::to_string(running["pid"].get<int>())));
    CHECK_THAT(procs, Contains(std::to_string(PidFromFile(dir / "escapee.pid"))));
    REQUIRE(tpud.Tpuctl({"stop", "grouped"}).exit_code == 0);
    REQUIRE(tpud.WaitForState("grouped", "stopped")["state"] == "stopped");
    CHECK_FALSE(Alive(PidFromFile(dir / "escapee.pid")));
    CHECK_FALSE(fs::exists(root / "grouped" / "1"));  // Removed once empty.
  }
  std::error_code ec;
  fs::remove(root / "grouped", ec);
  ::rmdir(root.c_str());
}

TEST_CASE("Adversarial: stop wins against a zero-backoff crash loop, 1000 rounds out of 1000",
          "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: crashloop
  command: [/bin/sh, -c, 'exit 1']
  start_seconds: 5
  restart: {max_restarts: 100000000, backoff_initial_seconds: 0, backoff_max_seconds: 0}
  stop: {grace_seconds: 5}
)", "launcher: local");
  auto stub = StubFor(tpud);
  for (int round = 0; round < 1000; ++round) {
    INFO("round " << round);
    grpc::ClientContext start_ctx, stop_ctx;
    v1::StartJobRequest start;
    start.set_name("crashloop");
    v1::StartJobResponse started;
    REQUIRE(stub->StartJob(WithDeadline(&start_ctx), start, &started).ok());
    v1::StopJobRequest stop;
    stop.set_name("crashloop");
    v1::StopJobResponse stopped;
    REQUIRE(stub->StopJob(WithDeadline(&stop_ctx), stop, &stopped).ok());
    REQUIRE(WaitFor([&] {
      grpc::ClientContext ctx;
      v1::GetJobRequest get;
      get.set_name("crashloop");
      v1::GetJobResponse job;
      return stub->GetJob(WithDeadline(&ctx), get, &job).ok() && job.job().state() == v1::JOB_STATE_STOPPED;
    }, Seconds(10)));
  }
  // Every start came from a StartJob: none from a backoff timer that fired after its stop.
  int stray = 0, starts = 0;
  for (const json& event : tpud.Events("crashloop")) {
    if (event.value("type", "") != "transition" || event["to"] != "starting" || event["from"] != "stopped") continue;
    ++starts;
    if (event["reason"] != "started by tpuctl") ++stray;
  }
  CHECK(stray == 0);
  CHECK(starts == 1000);
  CHECK(tpud.Status("crashloop")["state"] == "stopped");
}

TEST_CASE("Adversarial: the SIGKILL rung comes on time even while the shim is frozen",
          "[integration][adversarial]") {
  TempDir dir;
  const std::string d = dir.path().string();
  TpudProcess tpud(dir, R"(
- name: stubborn
  command: [/bin/sh, -c, 'trap "" INT TERM; echo $$ > pid; while :; do sleep 0.05; done']
  working_dir: )" + YamlQuote(d) + R"(
  start_seconds: 0.2
  stop: {grace_seconds: 0.5, signals: [SIGTERM, SIGKILL]}
)");
  REQUIRE(tpud.Tpuctl({"start", "stubborn"}).exit_code == 0);
  tpud.WaitForState("stubborn", "running");
  const int trainer = PidFromFile(dir / "pid");
  const json state = json::parse(ReadFile(dir / "state" / "attempts" / "stubborn" / "1" / "state.json"));
  const int shim = state["shim_pid"].get<int>();
  REQUIRE(::kill(shim, SIGSTOP) == 0);  // As busy as a shim can get.
  REQUIRE(tpud.Tpuctl({"stop", "stubborn"}).exit_code == 0);
  CHECK(WaitFor([&] { return !Alive(trainer); }, Seconds(5)));  // 0.5 s grace, then SIGKILL from tpud.
  REQUIRE(::kill(shim, SIGCONT) == 0);
  CHECK(tpud.WaitForState("stubborn", "stopped")["state"] == "stopped");
}

}  // namespace
}  // namespace tpud::testing
