#include "daemon/tpu/device_holders.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

// The numeric entries of `dir` (pids in /proc, fds in /proc/<pid>/fd).
std::vector<int> NumericEntries(DIR* dir) {
  std::vector<int> numbers;
  while (dirent* entry = ::readdir(dir)) {
    int number = 0;
    if (absl::SimpleAtoi(entry->d_name, &number)) numbers.push_back(number);
  }
  return numbers;
}

std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

std::string ReadComm(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

// The wanted paths `pid` holds open; false when its fds cannot be read.
bool ScanProcess(const std::string& proc_dir, const std::map<std::string, std::string>& wanted,
                 std::set<std::string>& held) {
  const std::string fd_dir = proc_dir + "/fd";
  Dir dir(::opendir(fd_dir.c_str()));
  if (!dir) return errno != EACCES && errno != EPERM;  // Gone (ENOENT) is not "uninspectable".
  for (int fd : NumericEntries(dir.get())) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(absl::StrCat(fd_dir, "/", fd).c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    auto it = wanted.find(std::string(target, static_cast<std::size_t>(n)));
    if (it != wanted.end()) held.insert(it->second);
  }
  return true;
}

}  // namespace

std::vector<std::string> ExpandGlobs(const std::vector<std::string>& patterns) {
  std::set<std::string> paths;
  for (const std::string& pattern : patterns) {
    glob_t matches{};
    if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
      for (std::size_t i = 0; i < matches.gl_pathc; ++i) paths.insert(matches.gl_pathv[i]);
    }
    ::globfree(&matches);
  }
  return {paths.begin(), paths.end()};
}

absl::StatusOr<HolderScan> FindFileHolders(const std::string& proc_root,
                                           const std::vector<std::string>& paths) {
  std::map<std::string, std::string> wanted;  // Canonical path -> the caller's name for it.
  for (const std::string& path : paths) wanted.emplace(Canonical(path), path);
  Dir proc(::opendir(proc_root.c_str()));
  if (!proc) {
    const int err = errno;
    const std::string message = absl::StrCat("list ", proc_root, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  HolderScan scan;
  if (wanted.empty()) return scan;
  std::vector<int> pids = NumericEntries(proc.get());
  std::sort(pids.begin(), pids.end());
  for (int pid : pids) {
    if (pid == ::getpid()) continue;
    const std::string proc_dir = absl::StrCat(proc_root, "/", pid);
    std::set<std::string> held;
    if (!ScanProcess(proc_dir, wanted, held)) ++scan.uninspectable;
    if (held.empty()) continue;
    const std::string comm = ReadComm(proc_dir);
    for (const std::string& path : held) scan.holders.push_back(FileHolder{pid, path, comm});
  }
  return scan;
}

std::string ProcessName(const std::string& proc_root, int pid) {
  return ReadComm(absl::StrCat(proc_root, "/", pid));
}

absl::StatusOr<int> LockHolderPid(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat("open ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  struct flock lock {};
  lock.l_type = F_WRLCK;  // "Could I write-lock the whole file?" conflicts with any lock.
  lock.l_whence = SEEK_SET;
  const int rc = ::fcntl(fd, F_GETLK, &lock);
  const int err = errno;
  ::close(fd);  // Closing drops this process's own locks on the file: it holds none.
  if (rc != 0) return absl::InternalError(absl::StrCat("fcntl(F_GETLK) ", path, ": ", std::strerror(err)));
  if (lock.l_type == F_UNLCK) return 0;
  return lock.l_pid > 0 ? lock.l_pid : -1;
}

absl::Status RemoveStaleLockFile(const std::string& lock_file, const std::string& proc_root) {
  absl::StatusOr<int> locker = LockHolderPid(lock_file);
  if (absl::IsNotFound(locker.status())) return absl::OkStatus();
  if (!locker.ok()) return locker.status();
  if (*locker != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lock file ", lock_file, " is locked by ",
        *locker > 0 ? absl::StrCat("pid ", *locker) : "an OFD lock", ": not stale, not removed"));
  }
  absl::StatusOr<HolderScan> scan = FindFileHolders(proc_root, {lock_file});
  if (!scan.ok()) return scan.status();
  if (!scan->holders.empty()) {
    const FileHolder& h = scan->holders.front();
    return absl::FailedPreconditionError(absl::StrCat("lock file ", lock_file, " is open in pid ", h.pid,
                                                      " (", h.comm, "): not stale, not removed"));
  }
  if (::unlink(lock_file.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("remove ", lock_file, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tpud
