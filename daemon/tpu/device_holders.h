// Who holds this host's TPU: processes with the device files or libtpu's lock
// file open, found by scanning /proc/<pid>/fd/* symlinks, and the owner of the
// lockf lock on the lock file. Facts (reference §4, from openxla
// xla/stream_executor/tpu/tpu_initialize_util.cc and jax-ml/jax#10192): the
// devices are /dev/accel* (older TPUs) or /dev/vfio/N (newer); libtpu takes
// lockf on /tmp/libtpu_lockfile for the life of the process, and an aborted
// process can leave the file behind (stale, unlocked).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpud {

// One process holding one file.
struct FileHolder {
  int pid = 0;
  std::string path;  // The held file, as the caller named it.
  std::string comm;  // /proc/<pid>/comm, e.g. "python3"; empty if unreadable.
};

struct HolderScan {
  std::vector<FileHolder> holders;  // Ordered by pid, then path.
  int uninspectable = 0;            // Processes whose fds this process may not read (EACCES).
};

// The existing paths matching absolute glob patterns, sorted and deduplicated.
// A pattern that matches nothing contributes nothing.
std::vector<std::string> ExpandGlobs(const std::vector<std::string>& patterns);

// Processes other than this one with a descriptor open on any of `paths`:
// each /proc_root/<pid>/fd/* symlink target is compared with the paths'
// canonical forms (symlinks resolved). Processes that exit mid-scan are
// skipped. Errors: NotFound/Internal when proc_root cannot be listed.
absl::StatusOr<HolderScan> FindFileHolders(const std::string& proc_root,
                                           const std::vector<std::string>& paths);

// /proc_root/<pid>/comm ("python3"), or "" when unreadable.
std::string ProcessName(const std::string& proc_root, int pid);

// The pid owning a POSIX record lock (lockf(3), fcntl F_SETLK) or an OFD lock
// on `path`, tested with fcntl(F_GETLK) for a whole-file write lock: 0 when
// none, -1 for an OFD lock (no owner pid). NotFound when `path` does not
// exist. Locks held by this very process are invisible to the test.
absl::StatusOr<int> LockHolderPid(const std::string& path);

// Removes libtpu's lock file when it is stale: no lock on it (LockHolderPid)
// and no process has it open (FindFileHolders). OK when removed or absent;
// FailedPrecondition naming the pid otherwise. A libtpu starting in the same
// instant can still race the removal: call it only when no job runs.
absl::Status RemoveStaleLockFile(const std::string& lock_file, const std::string& proc_root);

}  // namespace tpud
