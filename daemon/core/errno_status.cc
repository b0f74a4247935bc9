#include "daemon/core/errno_status.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tpud {

bool IsTransientErrno(int err) {
  return err == EAGAIN || err == ENOMEM || err == EMFILE || err == ENFILE || err == ENOSPC || err == EDQUOT;
}

absl::Status ErrnoStatus(int err, absl::string_view message) {
  const std::string text = absl::StrCat(message, ": ", std::strerror(err));
  if (IsTransientErrno(err)) return absl::UnavailableError(text);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(text);
  if (err == ENOENT) return absl::NotFoundError(text);
  return absl::InternalError(text);
}

absl::Status WriteAll(int fd, std::string_view content, const std::filesystem::path& path) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat(path.string(), ": write"));
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace tpud
