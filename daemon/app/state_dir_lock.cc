#include "daemon/app/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tpud {

absl::StatusOr<std::unique_ptr<StateDirLock>> StateDirLock::Acquire(const std::filesystem::path& state_dir) {
  const std::filesystem::path path = state_dir / "tpud.lock";
  // O_CLOEXEC: no job or shim inherits the lock (it would outlive tpud).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat(path.string(), ": open: ", std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buffer[32] = {};
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return absl::InternalError(absl::StrCat(path.string(), ": flock: ", std::strerror(err)));
    const std::string pid = n > 0 ? std::string(absl::StripAsciiWhitespace(std::string(buffer, n))) : "unknown";
    return absl::FailedPreconditionError(
        absl::StrCat("state_dir ", state_dir.string(), " is in use by tpud (pid ", pid, ")"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat(path.string(), ": write: ", std::strerror(err)));
  }
  return std::unique_ptr<StateDirLock>(new StateDirLock(fd));
}

StateDirLock::~StateDirLock() { ::close(fd_); }

}  // namespace tpud
