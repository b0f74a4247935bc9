// Helpers for tests/integration/shim_test.cc: temp dirs, an observer that
// records, running a loop until something happened, and a counting trainer.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/launch/shim_launcher.h"
#include "tests/support/temp_dir.h"

#ifndef TPUD_SHIM_BIN
#error "TPUD_SHIM_BIN must name the tpud-shim executable under test"
#endif

namespace tpud::shim_testing {

namespace fs = std::filesystem;
using tpud::testing::TempDir;
using namespace std::chrono_literals;

// Whatever happens in a test, no trainer outlives it.
struct KillGroupAtEnd {
  int pid = -1;
  ~KillGroupAtEnd() {
    if (pid > 0) ::kill(-pid, SIGKILL);
  }
};

struct Recorder final : AttemptObserver {
  std::vector<std::string> lines;
  std::optional<ExitStatus> exit;
  std::optional<absl::Status> started;
  void OnOutputLine(std::string_view line) override { lines.emplace_back(line); }
  void OnExit(const ExitStatus& status) override { exit = status; }
  void OnStarted(const absl::Status& status) override { started = status; }
};

inline std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `io` until `done()` holds; false after `timeout`.
inline bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
                     std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io.run_one_for(50ms) == 0) {
      io.restart();
      std::this_thread::sleep_for(10ms);
    }
  }
  return true;
}

// ShimLauncher::Launch, then `io` until the shim reported: the attempt, or
// the error (returned by Launch, or reported through OnStarted).
inline absl::StatusOr<std::unique_ptr<Attempt>> LaunchStarted(boost::asio::io_context& io, ShimLauncher& launcher,
                                                              const LaunchSpec& spec, Recorder* recorder) {
  recorder->started.reset();
  absl::StatusOr<std::unique_ptr<Attempt>> attempt = launcher.Launch(spec, recorder);
  if (!attempt.ok() || !(*attempt)->starting()) return attempt;
  if (!RunUntil(io, [&] { return recorder->started.has_value(); })) {
    return absl::DeadlineExceededError("no OnStarted within 20 s");
  }
  if (!recorder->started->ok()) return *recorder->started;
  return attempt;
}

inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = 20s) {
  boost::asio::io_context idle;
  return RunUntil(idle, done, timeout);
}

inline ShimLauncher::Options Options(const TempDir& dir) {
  ShimLauncher::Options options;
  options.state_dir = dir.path() / "state";
  options.shim_path = TPUD_SHIM_BIN;
  return options;
}

inline LaunchSpec Spec(const TempDir& dir, std::vector<std::string> argv,
                       std::map<std::string, std::string> env = {}) {
  LaunchSpec spec;
  spec.job = "t";
  spec.attempt = 1;
  spec.argv = std::move(argv);
  spec.working_dir = dir.path();
  spec.env = std::move(env);
  spec.log_path = dir.path() / "t.log";
  return spec;
}

// Runs `argv` under a shim to completion (bounded at 20 s).
inline Recorder Run(const std::vector<std::string>& argv, const TempDir& dir,
                    std::map<std::string, std::string> env = {}) {
  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto attempt = LaunchStarted(io, launcher, Spec(dir, argv, std::move(env)), &recorder);
  REQUIRE(attempt.ok());
  KillGroupAtEnd guard{(*attempt)->pid()};
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  return recorder;
}

// A shell condition that holds until the file STOP appears, or the test's
// directory is gone (so a failed test leaves nothing running).
inline std::string UntilStop(const TempDir& dir) {
  return "[ ! -e " + (dir.path() / "STOP").string() + " ] && [ -d " + dir.path().string() + " ]";
}

// Prints 0, 1, 2, ... every 50 ms until STOP, then "end".
inline std::vector<std::string> Counter(const TempDir& dir, int exit_code) {
  return {"/bin/sh", "-c",
          "i=0; while " + UntilStop(dir) +
              "; do echo $i; i=$((i+1)); sleep 0.05; done; echo end; exit " +
              std::to_string(exit_code)};
}

// The counter's log holds 0..N-1 then "end": nothing lost, nothing doubled.
inline void CheckLogHasNoGap(const fs::path& log, int min_lines) {
  std::istringstream in(ReadAll(log));
  std::string line;
  int expected = 0;
  while (std::getline(in, line) && line == std::to_string(expected)) ++expected;
  CHECK(line == "end");
  CHECK(expected >= min_lines);
}

// The first index in `lines` (numbers, then perhaps a word) whose number does
// not follow the previous one as `follows` wants; lines.size() if none.
inline std::size_t FirstOutOfOrder(const std::vector<std::string>& lines,
                                   const std::function<bool(int, int)>& follows) {
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(lines[i][0]))) break;
    if (!follows(std::stoi(lines[i - 1]), std::stoi(lines[i]))) return i;
  }
  return lines.size();
}

// The lines are consecutive counter values.
inline void CheckConsecutive(const std::vector<std::string>& lines) {
  CHECK(FirstOutOfOrder(lines, [](int a, int b) { return b == a + 1; }) == lines.size());
}

inline bool Alive(int pid) { return ::kill(pid, 0) == 0; }

}  // namespace tpud::shim_testing
