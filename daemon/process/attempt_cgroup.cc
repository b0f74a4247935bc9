#include "daemon/process/attempt_cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <spdlog/spdlog.h>

namespace tpud {
namespace fs = std::filesystem;
namespace {

constexpr long kCgroup2SuperMagic = 0x63677270;  // CGROUP2_SUPER_MAGIC, linux/magic.h.

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool OnCgroup2(const fs::path& dir) {
  struct statfs fs_info {};
  return ::statfs(dir.c_str(), &fs_info) == 0 && static_cast<long>(fs_info.f_type) == kCgroup2SuperMagic;
}

// The cgroup2 mount point, from /proc/self/mountinfo (field 5 is the mount
// point; the filesystem type follows the " - " separator).
std::optional<fs::path> Cgroup2Mount() {
  std::istringstream lines(ReadText("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos || !absl::StartsWith(line.substr(dash + 3), "cgroup2 ")) continue;
    const std::vector<std::string> fields = absl::StrSplit(line.substr(0, dash), ' ');
    if (fields.size() >= 5) return fs::path(fields[4]);
  }
  return std::nullopt;
}

// This process's cgroup v2 path ("0::/system.slice/tpud.service").
std::optional<std::string> OwnCgroup() {
  std::istringstream lines(ReadText("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    if (absl::StartsWith(line, "0::")) return line.substr(3);
  }
  return std::nullopt;
}

bool MarkedDelegated(const fs::path& dir) {
  for (const char* name : {"trusted.delegate", "user.delegate"}) {
    char value[8] = {};
    const ssize_t n = ::getxattr(dir.c_str(), name, value, sizeof(value) - 1);
    if (n > 0 && value[0] == '1') return true;
  }
  return false;
}

std::optional<fs::path> AutoRoot(std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<fs::path> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  const std::optional<fs::path> mount = Cgroup2Mount();
  const std::optional<std::string> own = OwnCgroup();
  if (!mount || !own) return fail("no cgroup v2 hierarchy");
  const fs::path dir = *mount / fs::path(*own).relative_path();
  if (*own == "/" || !MarkedDelegated(dir)) {
    return fail(absl::StrCat("cgroup ", dir.string(), " is not delegated to tpud (Delegate=yes)"));
  }
  if (::access(dir.c_str(), W_OK) != 0) return fail(absl::StrCat("cgroup ", dir.string(), " is not writable"));
  if (::access((dir / "cgroup.kill").c_str(), F_OK) != 0) return fail("no cgroup.kill (Linux < 5.14)");
  return dir / "attempts";
}

}  // namespace

absl::StatusOr<std::optional<fs::path>> ResolveCgroupRoot(const std::string& setting, std::string* why) {
  if (setting.empty() || setting == "none") return std::optional<fs::path>();
  if (setting == "auto") return AutoRoot(why);
  const fs::path dir(setting);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat("cgroup_root ", setting, ": mkdir: ", ec.message()));
  }
  if (!OnCgroup2(dir)) return absl::FailedPreconditionError(absl::StrCat("cgroup_root ", setting, ": not a cgroup2 filesystem"));
  if (::access((dir / "cgroup.kill").c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cgroup_root ", setting, ": no cgroup.kill (Linux < 5.14)"));
  }
  return std::optional<fs::path>(dir);
}

absl::StatusOr<fs::path> CreateAttemptCgroup(const fs::path& root, std::string_view job, int attempt) {
  const fs::path dir = root / std::string(job) / std::to_string(attempt);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cgroup ", dir.string(), ": mkdir: ", ec.message()));
  return dir;
}

absl::Status KillCgroup(const fs::path& cgroup) {
  const int fd = ::open((cgroup / "cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cgroup ", cgroup.string(), ": cgroup.kill: ", std::strerror(errno)));
  }
  const bool ok = ::write(fd, "1", 1) == 1;
  const int err = errno;
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cgroup ", cgroup.string(), ": cgroup.kill: ", std::strerror(err)));
  return absl::OkStatus();
}

bool CgroupEmpty(const fs::path& cgroup) {
  std::error_code ec;
  if (!fs::exists(cgroup / "cgroup.events", ec)) return true;
  return absl::StrContains(ReadText(cgroup / "cgroup.events"), "populated 0");
}

absl::Status RemoveCgroup(const fs::path& cgroup) {
  if (::rmdir(cgroup.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cgroup ", cgroup.string(), ": rmdir: ", std::strerror(errno)));
}

LaunchSpec WithAttemptCgroup(LaunchSpec spec, const std::filesystem::path& cgroup_root) {
  if (cgroup_root.empty()) return spec;
  absl::StatusOr<std::filesystem::path> cgroup = CreateAttemptCgroup(cgroup_root, spec.job, spec.attempt);
  if (!cgroup.ok()) {
    spdlog::warn("job {}: {}; attempt {} runs without a cgroup", spec.job, std::string(cgroup.status().message()),
                 spec.attempt);
    return spec;
  }
  spec.cgroup = *cgroup;
  return spec;
}

}  // namespace tpud
