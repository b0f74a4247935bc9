// tpud as a systemd service: sd_notify messages on a NOTIFY_SOCKET, config
// reload with SIGHUP (good and bad configs), and the unit file itself.
#include <fstream>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <regex>

#include "tests/integration/harness.h"
#include "tests/integration/processes.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using json = nlohmann::json;

// A job that runs until stopped; prints its environment first.
std::string SleeperJob(const std::string& name, const std::string& extra = "") {
  return "- name: " + name + "\n  command: [/bin/sh, -c, 'env; echo " + name + extra +
         "; exec sleep 1000']\n  autostart: true\n  start_seconds: 0.2\n  stop: {grace_seconds: 2}\n";
}

// The role of systemd's notification socket: a unix datagram socket in `dir`.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~NotifySocket() { ::close(fd_); }
  const std::filesystem::path& path() const { return path_; }

  // Waits until a message so far received satisfies `match`; returns it ("" on timeout).
  std::string WaitFor(const std::function<bool(const std::string&)>& match, Seconds timeout) {
    std::string found;
    testing::WaitFor(
        [&] {
          Drain();
          for (const std::string& m : messages_) {
            if (match(m)) found = m;
          }
          return !found.empty();
        },
        timeout);
    return found;
  }
  int Count(const std::string& exact) {
    Drain();
    return static_cast<int>(std::count(messages_.begin(), messages_.end(), exact));
  }
  void Clear() {
    Drain();
    messages_.clear();
  }

 private:
  void Drain() {
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd_, buffer, sizeof buffer, 0)) > 0;) messages_.emplace_back(buffer, n);
  }

  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<std::string> messages_;
};

// Sets environment variables for the tpud started while it lives.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars) : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : vars_) ::unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// Rewrites the `jobs:` list of tpud's config (the harness writes it last).
void RewriteJobs(const TpudProcess& tpud, const std::string& jobs_yaml) {
  const std::string config = ReadFile(tpud.config_path());
  const std::size_t jobs = config.find("\njobs:");
  REQUIRE(jobs != std::string::npos);
  std::ofstream(tpud.config_path()) << config.substr(0, jobs + 1) << "jobs:\n" << jobs_yaml;
}

// SIGHUP, then waits until tpud's log has `marker` (a line of the reload).
void Reload(const TpudProcess& tpud, const std::string& marker) {
  const std::size_t seen = tpud.StderrText().size();
  REQUIRE(::kill(tpud.pid(), SIGHUP) == 0);
  const bool logged =
      WaitFor([&] { return tpud.StderrText().find(marker, seen) != std::string::npos; }, Seconds(10));
  INFO(tpud.StderrText());
  REQUIRE(logged);
}

int PidOf(const TpudProcess& tpud, const std::string& job) {
  const json status = tpud.WaitForState(job, "running");
  REQUIRE(status["state"] == "running");
  return status["pid"].get<int>();
}

bool StartsWithPrefix(const std::string& message, const std::string& prefix) {
  return message.rfind(prefix, 0) == 0;
}

TEST_CASE("systemd: READY=1 with STATUS once listening, WATCHDOG=1 from the loop, STOPPING=1 on SIGTERM",
          "[integration][service]") {
  TempDir dir;
  NotifySocket notify(dir / "notify.sock");
  std::optional<TpudProcess> tpud;
  {
    ScopedEnv env({{"NOTIFY_SOCKET", notify.path().string()}, {"WATCHDOG_USEC", "400000"}});
    tpud.emplace(dir, SleeperJob("sleeper"));
  }
  const std::string ready =
      notify.WaitFor([](const std::string& m) { return StartsWithPrefix(m, "READY=1"); }, Seconds(5));
  CHECK_THAT(ready, Contains("\nSTATUS="));
  CHECK_THAT(ready, Contains("\nMAINPID=" + std::to_string(tpud->pid())));
  PidOf(*tpud, "sleeper");
  CHECK(notify.WaitFor([](const std::string& m) { return m == "STATUS=1 job: 1 running"; }, Seconds(5)) !=
        "");
  notify.Clear();
  CHECK(WaitFor([&] { return notify.Count("WATCHDOG=1") >= 3; }, Seconds(3)));  // Every 0.2 s.
  // The job inherits neither the watchdog nor the notification socket: they are tpud's.
  CHECK(tpud->Logs("sleeper").find("WATCHDOG_USEC") == std::string::npos);
  CHECK(tpud->Logs("sleeper").find("NOTIFY_SOCKET") == std::string::npos);

  REQUIRE(::kill(tpud->pid(), SIGHUP) == 0);
  CHECK(
      notify.WaitFor([](const std::string& m) { return StartsWithPrefix(m, "RELOADING=1\nMONOTONIC_USEC="); },
                     Seconds(5)) != "");
  CHECK(notify.WaitFor([](const std::string& m) { return m == "READY=1\nSTATUS=1 job: 1 running"; },
                       Seconds(5)) != "");
  CHECK(tpud->Shutdown() == 0);
  CHECK(notify.Count("STOPPING=1") == 1);
}

TEST_CASE(
    "Reload: SIGHUP adds jobs, changes specs for the next attempt, removes stopped jobs, keeps running ones",
    "[integration][service]") {
  TempDir dir;
  TpudProcess tpud(dir, SleeperJob("keep") + SleeperJob("busy") + "- name: idle\n  command: [/bin/true]\n");
  const int keep_pid = PidOf(tpud, "keep");
  const int busy_pid = PidOf(tpud, "busy");

  RewriteJobs(tpud, SleeperJob("keep", "-v2") + SleeperJob("added"));
  Reload(tpud,
         "reload: added added; changed keep; removed idle; kept running busy (removed from the config)");

  PidOf(tpud, "added");  // autostart: started by the reload.
  const json keep = tpud.Status("keep");
  CHECK(keep["pid"] == keep_pid);  // The running attempt is untouched...
  CHECK(keep["attempt"] == 1);
  CHECK(keep["state"] == "running");
  CHECK(tpud.Tpuctl({"status", "idle"}).exit_code == 3);
  const json busy = tpud.Status("busy");
  CHECK(busy["pid"] == busy_pid);
  CHECK(busy["state"] == "running");
  CHECK_THAT(busy["origin"].get<std::string>(), StartsWith("removed-from-config:"));

  // ...and the next attempt runs the new spec.
  REQUIRE(tpud.Tpuctl({"restart", "keep"}).exit_code == 0);
  CHECK(WaitFor([&] { return tpud.Logs("keep").find("keep-v2") != std::string::npos; }, Seconds(10)));

  // A removed job that stopped goes at the next reload.
  REQUIRE(tpud.Tpuctl({"stop", "busy"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("busy", "stopped")["state"] == "stopped");
  Reload(tpud, "reload: removed busy\n");
  CHECK(tpud.Tpuctl({"status", "busy"}).exit_code == 3);
}

TEST_CASE("Reload: a bad config is rejected naming file, line and key, the running config stays",
          "[integration][service]") {
  TempDir dir;
  TpudProcess tpud(dir, SleeperJob("keep"));
  const int keep_pid = PidOf(tpud, "keep");
  Reload(tpud, "reload: no changes\n");  // The same config again.

  RewriteJobs(tpud,
              SleeperJob("keep") + "- name: bad\n  command: [/bin/true]\n  restart: {max_restarts: -1}\n");
  Reload(tpud, "keeping the running config");
  const std::regex error(
      std::regex_replace(tpud.config_path().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      R"(:\d+: jobs\[1\]\.restart\.max_restarts: must be >= 0, got -1; keeping the running config)");
  CHECK(std::regex_search(tpud.StderrText(), error));
  CHECK(tpud.Tpuctl({"status", "bad"}).exit_code == 3);
  const json keep = tpud.Status("keep");
  CHECK(keep["pid"] == keep_pid);
  CHECK(keep["state"] == "running");
  CHECK(tpud.Info()["pid"] == tpud.pid());

  RewriteJobs(tpud, "- name: [broken\n");  // Not even YAML.
  Reload(tpud, "keeping the running config");
  CHECK(tpud.Status("keep")["pid"] == keep_pid);
}

TEST_CASE("systemd: the unit passes systemd-analyze verify", "[integration][service]") {
  if (RunCommand({"sh", "-c", "command -v systemd-analyze"}).exit_code != 0) {
    WARN("systemd-analyze not installed (Debian package systemd): not verified");
    return;
  }
  TempDir dir;
  std::string unit = ReadFile(std::filesystem::path(TPUD_SOURCE_DIR) / "systemd/tpud.service");
  REQUIRE(!unit.empty());
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"/usr/bin/tpud ", TPUD_BIN " "}}) {
    for (std::size_t at; (at = unit.find(from)) != std::string::npos;) unit.replace(at, from.size(), to);
  }
  const std::filesystem::path copy = dir.WriteFile("tpud.service", unit);
  const CommandResult verify = RunCommand({"systemd-analyze", "verify", copy.string()}, Seconds(60));
  INFO(verify.out << verify.err);
  CHECK(verify.exit_code == 0);
  CHECK(verify.err.find("tpud.service") == std::string::npos);  // No warning about the unit.
  for (const char* line :
       {"Type=notify", "KillMode=process", "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID",
        "NotifyAccess=main", "OOMPolicy=continue", "PrivateDevices=no", "PrivateTmp=no"}) {
    INFO(line);
    CHECK(unit.find(std::string("\n") + line + "\n") != std::string::npos);
  }
  CHECK(std::regex_search(unit, std::regex(R"(\nWatchdogSec=\d+)")));
}

}  // namespace
}  // namespace tpud::testing
