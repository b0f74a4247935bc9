// Turning an errno into a status whose code says whether retrying may help.
// The daemon's launch path (the shim's spawn, the attempt directory, the
// spec file) reports errors this way, so the job machine retries a launch
// that failed for want of processes, fds, memory or disk, and fails one that
// cannot work (a missing executable or user, a denied working_dir).
// Thread-safety: pure functions.
#pragma once

#include "absl/strings/string_view.h"

#include <filesystem>
#include <string_view>

#include "absl/status/status.h"

namespace tpud {

// True for errnos that say the machine is short of something for now:
// EAGAIN (fork: too many processes), ENOMEM, EMFILE, ENFILE, ENOSPC, EDQUOT.
// errno(3) and fork(2), open(2), write(2) say when each is returned.
bool IsTransientErrno(int err);

// `message` (which should already name the step and the path) with a code
// by `err`: Unavailable when IsTransientErrno, PermissionDenied for EACCES
// and EPERM, NotFound for ENOENT, else Internal. std::strerror(err) is
// appended after ": ".
absl::Status ErrnoStatus(int err, absl::string_view message);

// Writes all of `content` to `fd`, through short writes and EINTR. Errors:
// ErrnoStatus of the failed write(2), the message naming `path`
// ("PATH: write: No space left on device").
absl::Status WriteAll(int fd, std::string_view content, const std::filesystem::path& path);

}  // namespace tpud
