// Launching attempts: the seam between the supervisor and the processes it runs.
//
// Today's implementation (LocalLauncher) forks the trainer from the daemon. The
// interface is shaped so a per-attempt shim (containerd-style, see README
// "Architecture") can implement it instead: an Attempt is identified by its
// pid, owns the job's log file and its exit status, and reports both back
// through AttemptObserver.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/exit_status.h"
#include "daemon/core/launch_spec.h"
#include "daemon/core/lines.h"

namespace tpud {

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
  // For an Attempt that was starting() when Launch returned: called once,
  // when its trainer runs (OK: pid() is now its pid, and output and the exit
  // follow) or could not be started (the error, with the codes Launch
  // documents; nothing else is called after it). Never for an Attempt that
  // was not starting().
  virtual void OnStarted(const absl::Status& status) {}
};

// A launched attempt. Destroying it detaches from the process (it keeps
// running) but no callbacks arrive afterwards.
// Thread-safety: use only on the supervisor's event loop thread.
class Attempt {
 public:
  virtual ~Attempt() = default;
  // The main process's pid; also its process group id. 0 while starting().
  virtual int pid() const = 0;
  // True while the launcher waits for the trainer to start (its start is
  // reported by AttemptObserver::OnStarted, on the loop): Launch did not
  // block on it. False from the start for a launcher that knows the pid at
  // once.
  virtual bool starting() const { return false; }
  // Sends `signal` to the attempt's whole process group. A group that is
  // already gone is not an error. While starting(), the signal is kept and
  // sent the moment the trainer runs (dropped if it never does).
  virtual absl::Status SignalGroup(int signal) = 0;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts `spec.argv` in a new process group with stdout and stderr captured
  // to spec.log_path, or begins to (the returned Attempt is starting(), and
  // the same errors may then arrive later through OnStarted). Errors: NotFound (no such executable or working_dir),
  // PermissionDenied, Unavailable (a transient shortage: EAGAIN, ENOMEM,
  // EMFILE, ENFILE, ENOSPC; the caller retries later), Internal; the message
  // says which ("spawn \"/usr/bin/nope\": No such file or directory").
  virtual absl::StatusOr<std::unique_ptr<Attempt>> Launch(const LaunchSpec& spec,
                                                          AttemptObserver* observer) = 0;
};

}  // namespace tpud
