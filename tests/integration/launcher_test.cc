// LocalLauncher with real child processes: what an attempt sees, and what is
// left of it afterwards.
#include <signal.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "daemon/launch/local_launcher.h"
#include "daemon/process/log_file.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;
using tpud::testing::TempDir;

struct Recorder final : AttemptObserver {
  std::vector<std::string> lines;
  std::optional<ExitStatus> exit;
  boost::asio::io_context* io = nullptr;
  void OnOutputLine(std::string_view line) override { lines.emplace_back(line); }
  void OnExit(const ExitStatus& status) override {
    exit = status;
    io->stop();
  }
};

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `argv` to completion (bounded at 20 s) and returns what was observed.
Recorder Run(const std::vector<std::string>& argv, const TempDir& dir,
             std::map<std::string, std::string> env = {}) {
  boost::asio::io_context io;
  LocalLauncher launcher(io);
  Recorder recorder;
  recorder.io = &io;
  LaunchSpec spec;
  spec.job = "t";
  spec.argv = argv;
  spec.working_dir = dir.path();
  spec.env = std::move(env);
  spec.log_path = dir.path() / "t.log";
  auto attempt = launcher.Launch(spec, &recorder);
  REQUIRE(attempt.ok());
  io.run_for(std::chrono::seconds(20));
  REQUIRE(recorder.exit.has_value());
  return recorder;
}

TEST_CASE("Launcher: the attempt sees its env (empty values too), its working dir and no stdin", "[launcher]") {
  TempDir dir;
  Recorder r = Run({"/bin/sh", "-c",
                    "echo job=$TPUD_JOB; echo ckpt=${TPUD_CHECKPOINT-unset}; pwd; cat; echo done >&2"},
                   dir, {{"TPUD_JOB", "digits"}, {"TPUD_CHECKPOINT", ""}});
  CHECK(r.exit->code == 0);
  REQUIRE(r.lines.size() == 4);
  CHECK(r.lines[0] == "job=digits");
  CHECK(r.lines[1] == "ckpt=");  // Set but empty, as the contract says.
  CHECK(r.lines[2] == dir.path().string());
  CHECK(r.lines[3] == "done");  // stderr shares the log; `cat` read EOF from /dev/null.
  CHECK(ReadAll(dir.path() / "t.log") == "job=digits\nckpt=\n" + dir.path().string() + "\ndone\n");
}

TEST_CASE("Launcher: exit code and terminating signal are reported", "[launcher]") {
  TempDir dir;
  CHECK(Run({"/bin/sh", "-c", "exit 7"}, dir).exit->code == 7);
  const ExitStatus killed = *Run({"/bin/sh", "-c", "kill -KILL $$"}, dir).exit;
  CHECK(killed.signal == SIGKILL);
  CHECK(killed.Describe() == "killed by SIGKILL");
}

TEST_CASE("Launcher: members left in the group when the main process exits are killed", "[launcher]") {
  TempDir dir;
  const fs::path pid_file = dir.path() / "child.pid";
  Recorder r = Run({"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file.string() + "; exit 0"}, dir);
  CHECK(r.exit->code == 0);
  const pid_t child = std::stoi(ReadAll(pid_file));
  // SIGKILL was sent before OnExit; delivery is asynchronous, so wait
  // (bounded) until the child is dead: gone, or a zombie nobody reaped yet.
  const auto dead = [&] {
    const std::string stat = ReadAll("/proc/" + std::to_string(child) + "/stat");
    return stat.empty() || stat.find(") Z ") != std::string::npos;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!dead() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(dead());
}

TEST_CASE("Launcher: output written just before exit is in the log before OnExit", "[launcher]") {
  TempDir dir;
  Recorder r = Run({"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; exit 3"},
                   dir);
  CHECK(r.exit->code == 3);
  REQUIRE(r.lines.size() == 2000);
  CHECK(r.lines.back() == "line 1999");
}

TEST_CASE("Launcher: a missing executable or working dir is a clear error, not a crash", "[launcher]") {
  TempDir dir;
  boost::asio::io_context io;
  LocalLauncher launcher(io);
  Recorder recorder;
  LaunchSpec spec;
  spec.argv = {"/no/such/binary"};
  spec.working_dir = dir.path();
  spec.log_path = dir.path() / "t.log";
  auto missing = launcher.Launch(spec, &recorder);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("/no/such/binary") != std::string::npos);

  spec.argv = {"no-such-command-tpud"};
  auto not_in_path = launcher.Launch(spec, &recorder);
  REQUIRE_FALSE(not_in_path.ok());
  CHECK(std::string(not_in_path.status().message()).find("not found in PATH") != std::string::npos);

  spec.argv = {"/bin/true"};
  spec.working_dir = dir.path() / "absent";
  auto no_dir = launcher.Launch(spec, &recorder);
  REQUIRE_FALSE(no_dir.ok());
  CHECK(std::string(no_dir.status().message()).find("working_dir") != std::string::npos);
}

TEST_CASE("Log file: rotation keeps a bounded number of backups and never loses the current file", "[log]") {
  TempDir dir;
  const fs::path path = dir.path() / "job.log";
  auto log = RotatingLogFile::Open(path, 100, 2);
  REQUIRE(log.ok());
  for (int i = 0; i < 10; ++i) REQUIRE(log->Append(std::string(60, 'a' + i) + "\n").ok());
  CHECK(fs::exists(path));
  CHECK(fs::exists(dir.path() / "job.log.1"));
  CHECK(fs::exists(dir.path() / "job.log.2"));
  CHECK_FALSE(fs::exists(dir.path() / "job.log.3"));
  CHECK(ReadAll(path) == std::string(60, 'j') + "\n");
  CHECK(ReadAll(dir.path() / "job.log.1") == std::string(60, 'i') + "\n");
}

TEST_CASE("Log file: the last N lines span the current file and its first backup", "[log]") {
  TempDir dir;
  const fs::path path = dir.path() / "job.log";
  std::ofstream(dir.path() / "job.log.1") << "one\ntwo\nthree\n";
  std::ofstream(path) << "four\nfive";  // No trailing newline yet.
  auto lines = ReadLastLines(path, 3);
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"three\n", "four\n", "five\n"});
  CHECK(ReadLastLines(dir.path() / "absent.log", 5)->empty());
}

TEST_CASE("Line splitter: long lines arrive in pieces, partial lines wait for their end", "[log]") {
  LineSplitter splitter(8);
  std::vector<std::string> out;
  auto collect = [&](std::string_view line) { out.emplace_back(line); };
  splitter.Feed("ab", collect);
  splitter.Feed("c\n0123456789\nxy", collect);
  CHECK(out == std::vector<std::string>{"abc", "01234567", "89"});
  splitter.Flush(collect);
  CHECK(out.back() == "xy");

  out.clear();
  splitter.Feed("abcdefgh\n", collect);  // Exactly the limit: one line, no empty tail.
  splitter.Feed("ABCDEFGH", collect);     // A partial line at exactly the limit waits...
  splitter.Feed("\n", collect);           // ...and its newline ends it, adding no empty line.
  CHECK(out == std::vector<std::string>{"abcdefgh", "ABCDEFGH"});
}

}  // namespace
}  // namespace tpud
