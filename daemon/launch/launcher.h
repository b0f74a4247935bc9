// Launching attempts: the seam between the supervisor and the processes it runs.
//
// Today's implementation (LocalLauncher) forks the trainer from the daemon. The
// interface is shaped so a per-attempt shim (containerd-style, see README
// "Architecture") can implement it instead: an Attempt is identified by its
// pid, owns the job's log file and its exit status, and reports both back
// through AttemptObserver.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/common/lines.h"
#include "absl/status/statusor.h"

namespace tpud {

// How an attempt ended.
struct ExitStatus {
  int code = -1;             // Exit code; -1 when killed by a signal or never started.
  int signal = 0;            // Terminating signal; 0 when it exited.
  bool core_dumped = false;
  std::string spawn_error;   // Set when the process could not be started at all.

  bool succeeded() const { return spawn_error.empty() && signal == 0 && code == 0; }
  // "exit code 3", "killed by SIGKILL (core dumped)", "spawn failed: ...".
  std::string Describe() const;
};

// Builds an ExitStatus from a waitpid()/waitid() status word.
ExitStatus ExitStatusFromWaitStatus(int wait_status);
// "SIGTERM" for 15; "signal 77" for an unknown number.
std::string SignalName(int signal);
// 15 for "SIGTERM", "TERM" or "15"; -1 when unknown.
int SignalNumber(std::string_view name);

// Who an attempt runs as (job spec `user:`/`group:`), resolved by tpud before
// the launch so nothing between fork and exec needs the user database.
struct RunAs {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;  // Supplementary groups (initgroups(3) of `user`).
  std::string user;                   // Name for USER/LOGNAME; the uid as text when unnamed.
  std::filesystem::path home;         // For HOME; "/" when the user database has none.

  bool operator==(const RunAs&) const = default;
};

struct LaunchSpec {
  std::string job;
  int attempt = 0;
  // Unset: the attempt runs as tpud does. Set: its groups, gid and uid are
  // set in the child before exec (a failure there fails the spawn: it never
  // runs with tpud's privileges), HOME, USER and LOGNAME come from it unless
  // `env` sets them, and the log file is owned by it.
  std::optional<RunAs> run_as;
  // A cgroup v2 directory the trainer is moved into before exec (empty: none).
  // Ending the attempt then ends every process in it (cgroup.kill), however
  // far it escaped (launch/attempt_cgroup.h).
  std::filesystem::path cgroup;
  std::vector<std::string> argv;             // argv[0] without a '/' is looked up in PATH.
  std::filesystem::path working_dir;
  std::map<std::string, std::string> env;    // Set on top of the daemon's environment.
  std::filesystem::path log_path;            // Combined stdout+stderr is appended here.
  std::uint64_t log_max_bytes = 50ull << 20; // Rotate past this size (0: never).
  int log_backups = 10;                      // Keep log_path.1 .. log_path.N.
};

// Callbacks from a running attempt. Called on the supervisor's event loop
// thread, never inline from Launch().
class AttemptObserver {
 public:
  virtual ~AttemptObserver() = default;
  // One line of output without its '\n' (lines over 64 KiB arrive in pieces).
  // The bytes are already in the log file when this is called.
  virtual void OnOutputLine(std::string_view line) = 0;
  // One or more lines, each ending in '\n' (launchers deliver output this
  // way, LineSplitter::FeedBlocks). The default hands each to OnOutputLine;
  // an observer that can look at a block at once overrides it.
  virtual void OnOutputLines(std::string_view lines) {
    ForEachLine(lines, [this](std::string_view line) { OnOutputLine(line); });
  }
  // The job log stopped taking output (a full disk: `dropping` true) or took
  // it again (false). `dropped_bytes`: all this attempt lost from the log so
  // far. Output still reaches OnOutputLines while the log drops it.
  virtual void OnLogDropped(std::uint64_t dropped_bytes, bool dropping) {}
  // The attempt's main process ended, every other process of the attempt
  // (its process group, its cgroup, and for the shim launcher every
  // descendant) was killed and is gone, and all of its output has been
  // delivered. Called exactly once.
  virtual void OnExit(const ExitStatus& status) = 0;
};

// A launched attempt. Destroying it detaches from the process (it keeps
// running) but no callbacks arrive afterwards.
// Thread-safety: use only on the supervisor's event loop thread.
class Attempt {
 public:
  virtual ~Attempt() = default;
  // The main process's pid; also its process group id.
  virtual int pid() const = 0;
  // Sends `signal` to the attempt's whole process group. A group that is
  // already gone is not an error.
  virtual absl::Status SignalGroup(int signal) = 0;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts `spec.argv` in a new process group with stdout and stderr captured
  // to spec.log_path. Errors: NotFound (no such executable or working_dir),
  // PermissionDenied, Unavailable (a transient shortage: EAGAIN, ENOMEM,
  // EMFILE, ENFILE, ENOSPC; the caller retries later), Internal; the message
  // says which ("spawn \"/usr/bin/nope\": No such file or directory").
  virtual absl::StatusOr<std::unique_ptr<Attempt>> Launch(const LaunchSpec& spec,
                                                          AttemptObserver* observer) = 0;
};

}  // namespace tpud
