#include "daemon/process/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

absl::Status ErrnoStatus(const std::string& what, int err) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOSPC || err == EMFILE || err == ENFILE || err == ENOMEM || err == EDQUOT) {
    return absl::UnavailableError(message);  // Transient: retry later.
  }
  return absl::InternalError(message);
}

// Opens `path` for append and gives it to `owner`; -1 with errno on failure.
int OpenForAppend(const std::filesystem::path& path, const std::optional<RotatingLogFile::Owner>& owner) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd >= 0 && owner) (void)!::fchown(fd, owner->uid, owner->gid);
  return fd;
}

std::filesystem::path Backup(const std::filesystem::path& path, int n) {
  return std::filesystem::path(path.string() + "." + std::to_string(n));
}

}  // namespace

absl::StatusOr<RotatingLogFile> RotatingLogFile::Open(std::filesystem::path path,
                                                      std::uint64_t max_bytes, int backups,
                                                      std::optional<Owner> owner) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return ErrnoStatus(absl::StrCat("log ", path.string(), ": mkdir"), ec.value());
  const int fd = OpenForAppend(path, owner);
  if (fd < 0) return ErrnoStatus(absl::StrCat("log ", path.string(), ": open"), errno);
  struct stat st {};
  ::fstat(fd, &st);
  return RotatingLogFile(std::move(path), fd, static_cast<std::uint64_t>(st.st_size), max_bytes,
                         backups, owner);
}

RotatingLogFile::RotatingLogFile(std::filesystem::path path, int fd, std::uint64_t size,
                                 std::uint64_t max_bytes, int backups, std::optional<Owner> owner)
    : path_(std::move(path)),
      fd_(fd),
      size_(size),
      max_bytes_(max_bytes),
      backups_(backups),
      owner_(owner) {}

RotatingLogFile::RotatingLogFile(RotatingLogFile&& other) noexcept { *this = std::move(other); }

RotatingLogFile& RotatingLogFile::operator=(RotatingLogFile&& other) noexcept {
  if (this == &other) return *this;
  if (fd_ >= 0) ::close(fd_);
  path_ = std::move(other.path_);
  fd_ = std::exchange(other.fd_, -1);
  size_ = other.size_;
  max_bytes_ = other.max_bytes_;
  backups_ = other.backups_;
  owner_ = other.owner_;
  dropped_bytes_ = other.dropped_bytes_;
  dropping_ = other.dropping_;
  return *this;
}

RotatingLogFile::~RotatingLogFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RotatingLogFile::Append(std::string_view data) {
  if (max_bytes_ > 0 && size_ > 0 && size_ + data.size() > max_bytes_) {
    // Keep writing to the current file if rotation fails: losing output is worse.
    (void)Rotate();
  }
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      dropped_bytes_ += data.size();
      dropping_ = true;
      return ErrnoStatus(absl::StrCat("log ", path_.string(), ": write"), err);
    }
    size_ += static_cast<std::uint64_t>(n);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  dropping_ = false;
  return absl::OkStatus();
}

absl::Status RotatingLogFile::Rotate() {
  if (backups_ <= 0) {
    // No backups wanted: start the file over rather than grow without bound.
    if (::ftruncate(fd_, 0) != 0) return ErrnoStatus("log truncate", errno);
    size_ = 0;
    return absl::OkStatus();
  }
  std::error_code ec;
  for (int n = backups_ - 1; n >= 1; --n) {
    if (std::filesystem::exists(Backup(path_, n), ec)) {
      std::filesystem::rename(Backup(path_, n), Backup(path_, n + 1), ec);
    }
  }
  std::filesystem::rename(path_, Backup(path_, 1), ec);
  if (ec) return absl::InternalError(absl::StrCat("log rotate ", path_.string(), ": ", ec.message()));
  const int fd = OpenForAppend(path_, owner_);
  if (fd < 0) return ErrnoStatus(absl::StrCat("log ", path_.string(), ": reopen"), errno);
  ::close(fd_);
  fd_ = fd;
  size_ = 0;
  return absl::OkStatus();
}

std::optional<RotatingLogFile::Owner> LogOwner(const LaunchSpec& spec) {
  if (!spec.run_as) return std::nullopt;
  return RotatingLogFile::Owner{spec.run_as->uid, spec.run_as->gid};
}

namespace {

// Appends to `lines` the last `count` lines of one file (oldest first).
void TailOneFile(const std::filesystem::path& path, int count, std::deque<std::string>& lines) {
  constexpr std::streamoff kMaxRead = 16 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - kMaxRead);
  in.seekg(start);
  std::string content(static_cast<std::size_t>(size - start), '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  std::deque<std::string> own;
  std::size_t end = content.size();  // One past the current line's last byte.
  while (end > 0 && static_cast<int>(own.size()) < count) {
    // The '\n' ending the previous line, skipping the one ending this line.
    const std::size_t prev_nl = end >= 2 ? content.rfind('\n', end - 2) : std::string::npos;
    const std::size_t begin = prev_nl == std::string::npos ? 0 : prev_nl + 1;
    own.push_front(content.substr(begin, end - begin));
    end = begin;
  }
  if (!own.empty() && own.back().back() != '\n') own.back().push_back('\n');
  lines.insert(lines.begin(), own.begin(), own.end());
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadLastLines(const std::filesystem::path& path,
                                                       int count) {
  std::deque<std::string> lines;
  if (count <= 0) return std::vector<std::string>{};
  TailOneFile(path, count, lines);
  if (static_cast<int>(lines.size()) < count) {
    TailOneFile(Backup(path, 1), count - static_cast<int>(lines.size()), lines);
  }
  return std::vector<std::string>(lines.begin(), lines.end());
}

}  // namespace tpud
