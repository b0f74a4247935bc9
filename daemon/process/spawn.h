// Starting a trainer process and collecting its exit: the steps LocalLauncher
// (in the daemon) and tpud-shim (daemon/shim/) share. spawn.cc is the only
// file that includes Boost.Process.
#pragma once

#include <signal.h>

#include <filesystem>

#include "absl/status/statusor.h"
#include "daemon/core/exit_status.h"
#include "daemon/core/launch_spec.h"

namespace tpud {

// Checks that `spec` can be started and returns the executable to run:
// argv[0] looked up in this process's PATH when it has no '/', taken relative
// to spec.working_dir when relative; it must be executable and working_dir a
// directory.
// Errors: InvalidArgument ("spawn: empty command"); NotFound
// ("spawn \"x\": not found in PATH", "spawn \"/no/such\": No such file or
// directory", "... working_dir \"d\" is not a directory"); PermissionDenied.
absl::StatusOr<std::filesystem::path> ResolveExecutable(const LaunchSpec& spec);

// A started child whose stdout and stderr go into one pipe.
struct SpawnedProcess {
  int pid = -1;        // Also its process group id. The caller must reap it.
  int output_fd = -1;  // Read end of the stdout+stderr pipe, O_CLOEXEC; the caller owns it.
  int input_fd = -1;   // With `input_pipe`: write end of its stdin pipe, O_CLOEXEC; the caller owns it.
};

// Starts `exe` with arguments spec.argv[1..], spec.env set on top of this
// process's environment (empty values kept), in spec.working_dir, as a child
// of the calling process: in a new process group (pgid == pid, set in the
// child and the parent, so a signal sent right after this returns reaches the
// group), stdin from /dev/null (or, with `input_pipe`, a fresh pipe whose
// write end is returned), stdout and stderr into one fresh pipe, the
// signal mask and dispositions reset to defaults, and no file descriptor >= 3
// inherited; in spec.cgroup when set; as spec.run_as when set (see
// LaunchSpec). Errors ("spawn \"exe\": <reason>"): Unavailable when the
// failure is a transient shortage (EAGAIN, ENOMEM, EMFILE, ENFILE, ENOSPC:
// retry later); PermissionDenied (EACCES, EPERM, e.g. the uid could not be
// set); NotFound (ENOENT); Internal otherwise.
absl::StatusOr<SpawnedProcess> SpawnWithOutputPipe(const std::filesystem::path& exe,
                                                   const LaunchSpec& spec, bool input_pipe = false);

// Builds an ExitStatus from the siginfo of waitid(WEXITED).
ExitStatus ExitStatusFromSiginfo(const siginfo_t& info);

// For a child `pid` whose main process has exited: SIGKILLs whatever is left
// in its process group (workers and forks must not hold the TPU or the output
// pipe into the next attempt) and returns the exit status WITHOUT reaping it
// (waitid WNOWAIT), so the zombie keeps the pid and pgid reserved until Reap().
// Returns spawn_error "exit status unavailable" when `pid` is not an exited
// child of this process.
ExitStatus KillGroupAndPeekExit(int pid);

// Reaps the exited child `pid` (no-op if it is not one).
void Reap(int pid);

}  // namespace tpud
