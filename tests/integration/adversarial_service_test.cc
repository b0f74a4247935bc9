// Adversarial tests, service side: least privilege, and nothing lost
// silently. Each reproduces a defect seen on an earlier tpud (issue "Trust",
// D4, D7-D14, D16, D17) with the real binaries.
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/integration/adversity.h"
#include "tests/integration/harness.h"
#include "tests/integration/processes.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kSleeper[] = R"(
- name: sleeper
  command: [/bin/sleep, "1000"]
  autostart: true
  start_seconds: 0.2
)";

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

TEST_CASE("Adversarial: a job with user: runs as that user, with its HOME, and can read its own log",
          "[integration][adversarial]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  TpudProcess tpud(dir, R"(
- name: asnobody
  command: [/bin/sh, -c, 'echo "uid=$(id -u) home=$HOME user=$USER"; exec sleep 1000']
  user: nobody
  start_seconds: 0.2
)");
  REQUIRE(tpud.Tpuctl({"start", "asnobody"}).exit_code == 0);
  const json running = tpud.WaitForState("asnobody", "running");
  CHECK(ProcessUid(running["pid"].get<int>()) == NobodyUid());
  REQUIRE(WaitFor([&] { return tpud.Logs("asnobody").find("uid=") != std::string::npos; }, Seconds(5)));
  CHECK_THAT(tpud.Logs("asnobody"), Contains("uid=" + std::to_string(NobodyUid()) + " home=/nonexistent user=nobody"));
  struct stat st {};
  REQUIRE(::stat((dir / "logs" / "asnobody.log").c_str(), &st) == 0);
  CHECK(st.st_uid == NobodyUid());
  CHECK(running["user"] == "nobody");
}

TEST_CASE("Adversarial: a job's working_dir and checkpoint.dir are entered as its user, never as root",
          "[integration][adversarial]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  const fs::path private_dir = dir / "private";
  fs::create_directories(private_dir / "ckpt" / "checkpoint-5");
  dir.WriteFile("private/ckpt/checkpoint-5/trainer_state.json", "{}");
  fs::permissions(private_dir, fs::perms(0700));  // root's alone.
  TpudProcess tpud(dir, R"yaml(
- name: inside
  command: [/bin/sh, -c, 'echo "entered $(pwd)"; ls']
  working_dir: private
  user: nobody
- name: resume
  command: [/bin/sh, -c, 'echo "resume from [$TPUD_CHECKPOINT]"']
  user: nobody
  checkpoint: {dir: private/ckpt, layout: huggingface}
)yaml");
  REQUIRE(tpud.Tpuctl({"start", "inside"}).exit_code == 0);
  const json inside = tpud.WaitForState("inside", "failed");
  INFO(inside.dump());
  CHECK(inside["state"] == "failed");
  CHECK_THAT(inside["reason"].get<std::string>(), Contains("working_dir \"" + private_dir.string() + "\": Permission denied"));
  CHECK_THAT(tpud.Logs("inside"), !Contains("entered"));

  REQUIRE(tpud.Tpuctl({"start", "resume"}).exit_code == 0);
  // Counted and retried as any checkpoint lookup error is, and never run.
  const json resume = tpud.WaitForState("resume", "backoff");
  INFO(resume.dump());
  CHECK(resume["state"] == "backoff");
  CHECK_THAT(resume["reason"].get<std::string>(), Contains("Permission denied"));
  CHECK_THAT(tpud.Logs("resume"), !Contains("checkpoint-5"));
}

TEST_CASE("Adversarial: a non-root caller's job runs as the caller, naming root is PERMISSION_DENIED",
          "[integration][adversarial]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  TpudProcess tpud(dir, "", "socket_group: users");
  const CommandResult adhoc =
      TpuctlAsNobody(tpud, "users", {"start", "mine", "--", "/bin/sh", "-c", "id -u; exec sleep 1000"});
  REQUIRE(adhoc.exit_code == 0);
  const json running = tpud.WaitForState("mine", "running");
  CHECK(ProcessUid(running["pid"].get<int>()) == NobodyUid());
  // The reading of /etc/shadow that used to work for any member of the group:
  const fs::path spec = dir.WriteFile("steal.yaml", "name: steal\ncommand: [/bin/cat, /etc/shadow]\nuser: root\n");
  fs::permissions(spec, fs::perms(0644));
  const CommandResult denied = TpuctlAsNobody(tpud, "users", {"start", "-f", spec.string()});
  CHECK(denied.exit_code == 1);
  CHECK_THAT(denied.err, Contains("may only submit jobs that run as itself, not as user \"root\""));
  const CommandResult unnamed = TpuctlAsNobody(tpud, "users", {"start", "shadow", "--", "/bin/cat", "/etc/shadow"});
  REQUIRE(unnamed.exit_code == 0);  // Runs, as nobody, and cannot read it.
  REQUIRE(WaitFor([&] { return tpud.Logs("shadow").find("Permission denied") != std::string::npos; }, Seconds(10)));
  CHECK(TpuctlAsNobody(tpud, "users", {"stop", "shadow"}).exit_code == 0);
}

TEST_CASE("Adversarial: the state dir is 0750, the database and attempt files 0600", "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, kSleeper);
  tpud.WaitForState("sleeper", "running");
  CHECK(ModeOf(dir / "state") == 0750);
  CHECK(ModeOf(dir / "state" / "tpud.db") == 0600);
  CHECK(ModeOf(dir / "state" / "tpud.db-wal") == 0600);
  CHECK_FALSE(fs::exists(dir / "state" / "tpud.db-shm"));
  CHECK(ModeOf(dir / "state" / "attempts" / "sleeper" / "1" / "spec.json") == 0600);
  CHECK(ModeOf(dir / "state" / "attempts" / "sleeper" / "1" / "state.json") == 0600);
  CHECK(ModeOf(dir / "state" / "tpud.lock") == 0600);
}

// Opens `count` connections to `socket` as nobody and keeps them until the
// returned process is killed.
int HoldConnectionsAsNobody(const fs::path& socket, int count) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::setgroups(0, nullptr);
    (void)!::setgid(65534);
    (void)!::setuid(NobodyUid());
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
      (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    }
    ::pause();
    ::_exit(0);
  }
  KeepChild(child);
  return child;
}

TEST_CASE("Adversarial: 2000 connections from a non-member are closed at accept, root and the jobs are unharmed",
          "[integration][adversarial]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  TpudProcess tpud(dir, kSleeper, "socket_group: users\nsocket_mode: \"0666\"");
  const json before = tpud.WaitForState("sleeper", "running");
  const int holder = HoldConnectionsAsNobody(tpud.socket(), 2000);
  REQUIRE(WaitFor([&] { return tpud.StderrText().find("connection refused: permission denied") != std::string::npos; },
                  Seconds(10)));
  CHECK(tpud.Tpuctl({"status"}).exit_code == 0);
  const json after = tpud.Status("sleeper");
  CHECK(after["state"] == "running");
  CHECK(after["pid"] == before["pid"]);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ReleaseChild(holder);
  // A flood is one line a minute, not 2000.
  std::size_t lines = 0;
  for (const std::string& line : Lines(tpud.StderrText())) lines += line.find("connection refused") != std::string::npos;
  CHECK(lines == 1);
}

TEST_CASE("Adversarial: followed streams are capped per user with RESOURCE_EXHAUSTED", "[integration][adversarial]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  TpudProcess tpud(dir, kSleeper, "socket_group: users");
  tpud.WaitForState("sleeper", "running");
  // 17 followers at once, each with its stderr in a file: one more than a
  // user may hold. Exactly one is refused, whichever comes last.
  std::vector<pid_t> followers;
  for (int i = 0; i < 17; ++i) {
    const pid_t child = ::fork();
    if (child == 0) {
      const std::string err = (dir / ("follower." + std::to_string(i) + ".err")).string();
      (void)!::freopen(err.c_str(), "w", stderr);
      (void)!::freopen("/dev/null", "w", stdout);
      ::execlp("setpriv", "setpriv", "--reuid=nobody", "--regid=nogroup", "--groups=users", "--", TPUCTL_BIN,
               "--socket", tpud.socket().c_str(), "logs", "-f", "sleeper", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    KeepChild(child);
    followers.push_back(child);
  }
  std::vector<int> exited;  // Exit codes of the followers that ended.
  REQUIRE(WaitFor([&] {
    for (pid_t& child : followers) {
      int status = 0;
      if (child > 0 && ::waitpid(child, &status, WNOHANG) == child) {
        ReleaseChild(child);
        exited.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        child = -1;
      }
    }
    return !exited.empty();
  }, Seconds(15)));
  CHECK(exited == std::vector<int>{1});
  std::string refusals;
  for (int i = 0; i < 17; ++i) refusals += ReadFile(dir / ("follower." + std::to_string(i) + ".err"));
  CHECK_THAT(refusals, Contains("too many followed streams (logs -f, events -f) open: at most 16 per user"));
  CHECK(tpud.Tpuctl({"logs", "sleeper", "-n", "1"}).exit_code == 0);  // Root still may.
  for (pid_t child : followers) {
    if (child <= 0) continue;
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ReleaseChild(child);
  }
}

TEST_CASE("Adversarial: a launch that fails for lack of inodes retries, not counted, and runs once there is room",
          "[integration][adversarial]") {
  if (!CanMountTmpfs()) return;
  TempDir dir;
  Tmpfs logs(dir / "logs", "size=1m,nr_inodes=64");
  logs.Fill("filler", /*inodes=*/true);
  TpudProcess tpud(dir, R"(
- name: waits
  command: [/bin/sleep, "1000"]
  start_seconds: 0.2
  restart: {backoff_initial_seconds: 0.2, backoff_max_seconds: 0.5}
)", "launcher: local");
  REQUIRE(tpud.Tpuctl({"start", "waits"}).exit_code == 0);
  const json waiting = tpud.WaitForState("waits", "backoff");
  CHECK_THAT(waiting["reason"].get<std::string>(), Contains("No space left on device"));
  CHECK_THAT(waiting["reason"].get<std::string>(), Contains("not counted"));
  logs.Free();
  const json running = tpud.WaitForState("waits", "running", Seconds(10));
  CHECK(running["state"] == "running");
  CHECK(running["restarts"] == 0);
}

TEST_CASE("Adversarial: with the shim launcher, a full attempt directory retries the launch, not counted, "
          "and the job runs once there is room",
          "[integration][adversarial]") {
  if (!CanMountTmpfs()) return;
  TempDir dir;
  // The attempts' directories (spec.json, the shim's socket) on a full disk.
  Tmpfs attempts(dir / "state" / "attempts", "size=256k,nr_inodes=64");
  attempts.Fill("filler", /*inodes=*/true);
  TpudProcess tpud(dir, R"(
- name: waits
  command: [/bin/sleep, "1000"]
  start_seconds: 0.2
  restart: {backoff_initial_seconds: 0.2, backoff_max_seconds: 0.5}
)");
  REQUIRE(tpud.Tpuctl({"start", "waits"}).exit_code == 0);
  const json waiting = tpud.WaitForState("waits", "backoff");
  CHECK_THAT(waiting["reason"].get<std::string>(), Contains("No space left on device"));
  CHECK_THAT(waiting["reason"].get<std::string>(), Contains("transient"));
  CHECK(tpud.Status("waits")["state"] != "failed");
  attempts.Free();
  const json running = tpud.WaitForState("waits", "running", Seconds(10));
  CHECK(running["state"] == "running");
  CHECK(running["restarts"] == 0);
}

// chattr +/-i on the state database: writes through tpud's open descriptors
// then fail (EPERM), as on a disk gone read-only. False (skipped) where
// chattr does not work (not root, or a filesystem without the flag).
bool SetImmutable(const fs::path& dir, bool on) {
  bool ok = true;
  for (const char* file : {"tpud.db", "tpud.db-wal"}) {
    ok &= RunCommand({"chattr", on ? "+i" : "-i", (dir / file).string()}).exit_code == 0;
  }
  return ok;
}

TEST_CASE("Adversarial: with the state database unwritable, requests fail UNAVAILABLE, tpud stays up, and recovers",
          "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, kSleeper + std::string(R"(
- name: idle
  command: [/bin/sleep, "1000"]
  start_seconds: 0.2
)"));
  const json before = tpud.WaitForState("sleeper", "running");
  if (::geteuid() != 0 || !SetImmutable(dir / "state", true)) {
    SetImmutable(dir / "state", false);
    WARN("needs root and chattr on " << dir.path() << ": skipped");
    return;
  }
  const CommandResult start = tpud.Tpuctl({"start", "idle"});
  const json info = tpud.Info();
  SetImmutable(dir / "state", false);  // Before any REQUIRE can leave it immutable.
  CHECK(start.exit_code == 1);
  CHECK_THAT(start.err, Contains("state store"));
  CHECK_THAT(start.err, Contains("not carried out"));
  CHECK(tpud.Status("idle")["state"] == "stopped");
  CHECK(info["state_store_ok"] == false);
  CHECK(info["state_store_errors_total"].get<int>() >= 1);
  CHECK(tpud.Status("sleeper")["pid"] == before["pid"]);  // Untouched, and tpud is alive (no SIGBUS).
  CHECK_THAT(tpud.StderrText(), Contains("what tpud does now may not survive a restart"));
  CHECK(tpud.Tpuctl({"start", "idle"}).exit_code == 0);  // Writable again: works again.
  CHECK(tpud.Info()["state_store_ok"] == true);
  const HttpResult metrics = HttpGet("http://" + tpud.Info()["metrics_address"].get<std::string>() + "/metrics");
  CHECK_THAT(metrics.body, Contains("tpud_state_store_healthy 1"));
  CHECK_THAT(metrics.body, Contains("tpud_state_store_errors_total"));
}

TEST_CASE("Adversarial: output lost to a full log disk is counted, warned about once, and logging resumes",
          "[integration][adversarial]") {
  if (!CanMountTmpfs()) return;
  TempDir dir;
  Tmpfs logs(dir / "logs", "size=256k");
  const std::string d = dir.path().string();
  TpudProcess tpud(dir, R"(
- name: chatty
  command: [/bin/sh, -c, 'i=0; while :; do echo "line $i of output that is long enough to fill a disk soon"; i=$((i+1)); sleep 0.002; done']
  start_seconds: 0.2
)");
  REQUIRE(tpud.Tpuctl({"start", "chatty"}).exit_code == 0);
  tpud.WaitForState("chatty", "running");
  logs.Fill();
  REQUIRE(WaitFor([&] { return tpud.Status("chatty")["log_dropped_bytes"].get<long>() > 1000; }, Seconds(10)));
  CHECK(tpud.Status("chatty")["log_dropping"] == true);
  const HttpResult metrics = HttpGet("http://" + tpud.Info()["metrics_address"].get<std::string>() + "/metrics");
  CHECK_THAT(metrics.body, Contains("tpud_job_log_dropped_bytes_total{job=\"chatty\"}"));
  logs.Free();
  REQUIRE(WaitFor([&] { return tpud.Status("chatty")["log_dropping"] == false; }, Seconds(10)));
  const std::size_t size = fs::file_size(dir / "logs" / "chatty.log");
  REQUIRE(WaitFor([&] { return fs::file_size(dir / "logs" / "chatty.log") > size + 1000; }, Seconds(5)));
  std::size_t warnings = 0;
  for (const std::string& line : Lines(tpud.StderrText())) warnings += line.find("output is being dropped") != std::string::npos;
  CHECK(warnings == 1);
}

TEST_CASE("Adversarial: tpuctl remove forgets a stopped submitted job, never its log", "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, kSleeper);
  REQUIRE(tpud.Tpuctl({"start", "once", "--", "/bin/echo", "hello"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("once", "succeeded")["state"] == "succeeded");
  const CommandResult config_job = tpud.Tpuctl({"remove", "sleeper"});
  CHECK(config_job.exit_code == 1);
  CHECK_THAT(config_job.err, Contains("comes from the config"));
  const CommandResult removed = tpud.Tpuctl({"remove", "once"});
  CHECK(removed.exit_code == 0);
  CHECK(tpud.Tpuctl({"status", "once"}).exit_code == 3);
  CHECK(fs::exists(dir / "logs" / "once.log"));
  tpud.Shutdown();
  TpudProcess again(dir, kSleeper);
  CHECK(again.Tpuctl({"status", "once"}).exit_code == 3);  // Gone from the database too.
}

TEST_CASE("Adversarial: logs -n 100000 streams the tail in pieces", "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: verbose
  command: [/usr/bin/python3, -c, 'import sys; [print("%06d " % i + "x" * 93) for i in range(150000)]']
  start_seconds: 0
)");
  REQUIRE(tpud.Tpuctl({"start", "verbose"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("verbose", "succeeded", Seconds(30))["state"] == "succeeded");
  const CommandResult tail = tpud.Tpuctl({"logs", "verbose", "-n", "100000"}, Seconds(30));
  REQUIRE(tail.exit_code == 0);
  const std::vector<std::string> lines = Lines(tail.out);
  REQUIRE(lines.size() == 100000);
  CHECK(lines.front().rfind("050000 ", 0) == 0);
  CHECK(lines.back().rfind("149999 ", 0) == 0);
}

TEST_CASE("Adversarial: a FIFO in jobs_dir is a named error for --check and reload, never a hang",
          "[integration][adversarial]") {
  TempDir dir;
  fs::create_directories(dir / "jobs.d");
  TpudProcess tpud(dir, kSleeper, "jobs_dir: " + (dir / "jobs.d").string());
  tpud.WaitForState("sleeper", "running");
  REQUIRE(::mkfifo((dir / "jobs.d" / "trap.yaml").c_str(), 0644) == 0);
  const CommandResult check = RunCommand({TPUD_BIN, "--check", "--config", tpud.config_path().string()}, Seconds(10));
  CHECK_FALSE(check.timed_out);
  CHECK(check.exit_code == 2);
  CHECK_THAT(check.err, Contains((dir / "jobs.d" / "trap.yaml").string() + ": is a FIFO, not a regular file"));
  REQUIRE(::kill(tpud.pid(), SIGHUP) == 0);
  REQUIRE(WaitFor([&] { return tpud.StderrText().find("is a FIFO") != std::string::npos; }, Seconds(10)));
  CHECK(tpud.Status("sleeper")["state"] == "running");  // The loop kept turning.
}

TEST_CASE("Adversarial: echoed values are truncated, deep YAML nesting names its line", "[integration][adversarial]") {
  TempDir dir;
  TpudProcess tpud(dir, "");
  const fs::path spec = dir.WriteFile("huge.yaml", "name: " + std::string(250 * 1024, 'a') + "\ncommand: [x]\n");
  const CommandResult huge = tpud.Tpuctl({"start", "-f", spec.string()});
  CHECK(huge.exit_code == 4);
  CHECK(huge.err.size() < 1000);
  CHECK_THAT(huge.err, Contains("name: 256000 bytes, more than the limit of 63"));
  const fs::path deep = dir.WriteFile("deep.yaml", "name: deep\ncommand: [x]\nenv: " + std::string(5000, '[') +
                                                       std::string(5000, ']') + "\n");
  const CommandResult nested = tpud.Tpuctl({"start", "-f", deep.string()});
  CHECK(nested.exit_code == 4);
  CHECK_THAT(nested.err, Contains(":3: invalid YAML: nested more than"));
}

TEST_CASE("Adversarial: after a tpud restart the event history is still there", "[integration][adversarial]") {
  TempDir dir;
  {
    TpudProcess first(dir, R"(
- name: flaky
  command: [/bin/sh, -c, 'exit 3']
  start_seconds: 0
  restart: {max_restarts: 1, backoff_initial_seconds: 0.1}
)");
    REQUIRE(first.Tpuctl({"start", "flaky"}).exit_code == 0);
    REQUIRE(first.WaitForState("flaky", "failed")["state"] == "failed");
  }
  TpudProcess second(dir, R"(
- name: flaky
  command: [/bin/sh, -c, 'exit 3']
  start_seconds: 0
  restart: {max_restarts: 1, backoff_initial_seconds: 0.1}
)");
  const std::vector<json> events = second.Events("flaky");
  int transitions = 0, incidents = 0;
  for (const json& event : events) {
    transitions += event["type"] == "transition";
    incidents += event["type"] == "incident";
  }
  CHECK(transitions >= 4);  // stopped->starting->backoff->starting->failed.
  CHECK(incidents >= 2);
  bool failed = false;
  for (const json& event : events) failed |= event.value("to", "") == "failed";
  CHECK(failed);
}

}  // namespace
}  // namespace tpud::testing
