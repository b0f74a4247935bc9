// Integration test harness: runs the real tpud and tpuctl binaries (TPUD_BIN,
// TPUCTL_BIN) as child processes, with everything they touch (socket, state,
// logs, checkpoints) in a temp dir and metrics on port 0.
//
// Synchronisation is by polling an observable condition (WaitFor), never by a
// blind sleep. Helpers report failures by throwing std::runtime_error with the
// context (Catch2 shows the message as a failed test).
//
// Job processes orphaned by their parent are reaped by this process (see
// processes.h), so their absence can be checked with kill(2).
//
// Thread-safety: none; use from the test's thread only.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace tpud::testing {

using Seconds = std::chrono::duration<double>;

// How a finished command went.
struct CommandResult {
  int exit_code = -1;      // Exit code; 128+N when killed by signal N.
  bool timed_out = false;  // Killed with SIGKILL at the deadline.
  std::string out;         // Everything it wrote on stdout.
  std::string err;         // Everything it wrote on stderr.
};

// Runs argv (argv[0] searched in PATH) with stdin from `stdin_path`, capturing
// stdout and stderr; kills it with SIGKILL after `timeout`.
// Throws std::runtime_error when it cannot be spawned.
CommandResult RunCommand(const std::vector<std::string>& argv, Seconds timeout = Seconds(15),
                         const std::filesystem::path& stdin_path = "/dev/null");

// Runs TPUCTL_BIN with `args` exactly as given (no --socket added).
CommandResult RunTpuctl(const std::vector<std::string>& args, Seconds timeout = Seconds(15));

// Calls `predicate` every 50 ms until it returns true (then true) or `timeout`
// has passed (then false; the predicate was called at least once at or after it).
bool WaitFor(const std::function<bool()>& predicate, Seconds timeout);

// The whole file; "" when it cannot be read.
std::string ReadFile(const std::filesystem::path& path);
// `text` split at '\n' (a trailing newline gives no empty last line).
std::vector<std::string> Lines(const std::string& text);
// `text` as a YAML double-quoted scalar (JSON string syntax is valid YAML).
std::string YamlQuote(const std::string& text);

// An HTTP GET's outcome.
struct HttpResult {
  long status = 0;     // HTTP status; 0 when the request failed.
  std::string body;
  std::string error;   // curl's message when status is 0.
};

// GET `url` with libcurl, at most 10 s. Never throws for a failed request
// (status 0 and `error` say why).
HttpResult HttpGet(const std::string& url);

// A running tpud with its config, socket, state and logs under `dir`.
class TpudProcess {
 public:
  // Writes dir/tpud.yaml (socket dir/tpud.sock, state_dir dir/state, log_dir
  // dir/logs, metrics on 127.0.0.1:0) with `jobs_yaml` as its `jobs:` list (a
  // block sequence starting at column 0; empty: no jobs), starts
  // `tpud --config` with stdout+stderr to dir/tpud.stderr, and waits up to
  // `ready_timeout` until `tpuctl status` answers.
  // Throws std::runtime_error, with tpud's stderr, when it exits or never answers.
  TpudProcess(const TempDir& dir, const std::string& jobs_yaml,
              Seconds ready_timeout = Seconds(10));
  // As above, with `daemon_yaml` (top-level keys at column 0, e.g.
  // "gce_metadata: {enabled: \"true\"}") added to tpud.yaml before `jobs:`.
  TpudProcess(const TempDir& dir, const std::string& jobs_yaml, const std::string& daemon_yaml,
              Seconds ready_timeout = Seconds(10));
  // Shutdown() if still running, then ends any job process tpud left behind
  // (KillOrphans); prints tpud's output when the test failed.
  ~TpudProcess();
  TpudProcess(const TpudProcess&) = delete;
  TpudProcess& operator=(const TpudProcess&) = delete;

  // tpuctl --socket SOCKET args...
  CommandResult Tpuctl(const std::vector<std::string>& args, Seconds timeout = Seconds(15)) const;
  // `tpuctl status JOB --json` / `tpuctl info --json`, parsed. Throw on failure.
  nlohmann::json Status(const std::string& job) const;
  nlohmann::json Info() const;
  // `tpuctl events JOB --json`, one object per event, oldest first. Throws on failure.
  std::vector<nlohmann::json> Events(const std::string& job) const;
  // `tpuctl logs JOB -n LINES` stdout. Throws on failure.
  std::string Logs(const std::string& job, int lines = 1000) const;
  // Polls Status(job) until its state is `state` or `timeout` passes; returns
  // the last status seen (check its "state").
  nlohmann::json WaitForState(const std::string& job, const std::string& state,
                              Seconds timeout = Seconds(10)) const;

  // Sends SIGTERM and waits up to `timeout` for tpud to exit; then SIGKILL.
  // Returns its exit code (128+N when killed by signal N), nullopt when it had
  // to be killed. Later calls return the first result.
  std::optional<int> Shutdown(Seconds timeout = Seconds(10));

  std::string StderrText() const { return ReadFile(stderr_path_); }
  const std::filesystem::path& socket() const { return socket_; }
  const std::filesystem::path& config_path() const { return config_path_; }
  int pid() const { return pid_; }

 private:
  void WaitUntilReady(Seconds timeout);
  [[noreturn]] void FailStartup(const std::string& what);

  std::filesystem::path socket_;
  std::filesystem::path config_path_;
  std::filesystem::path stderr_path_;
  int pid_ = -1;
  bool exited_ = false;
  std::optional<int> exit_code_;
};

}  // namespace tpud::testing
