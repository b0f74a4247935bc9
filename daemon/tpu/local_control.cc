#include "daemon/tpu/local_control.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/exit_status.h"

namespace tpud {
namespace {

// A process to stop, held through a pidfd so its pid cannot be recycled under
// us. Without pidfds (Linux < 5.3, or a seccomp filter) it falls back to the
// bare pid. (Raw syscalls: glibc 2.36's <sys/pidfd.h> lacks C linkage for C++.)
class Target {
 public:
  explicit Target(const FileHolder& h) : pid_(h.pid), label_(absl::StrCat("pid ", h.pid, " (", h.comm, ")")) {
    fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    gone_ = fd_ < 0 && errno == ESRCH;
  }
  ~Target() {
    if (fd_ >= 0) ::close(fd_);
  }
  Target(Target&& other) noexcept
      : pid_(other.pid_),
        fd_(std::exchange(other.fd_, -1)),
        gone_(other.gone_),
        label_(std::move(other.label_)) {}
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  bool Exited() const {
    if (gone_) return true;
    if (fd_ < 0) return ::kill(pid_, 0) != 0 && errno == ESRCH;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;  // Readable once the process has terminated (zombies too).
  }
  absl::Status Signal(int signal) const {
    if (gone_) return absl::OkStatus();
    const long rc =
        fd_ >= 0 ? ::syscall(SYS_pidfd_send_signal, fd_, signal, nullptr, 0) : ::kill(pid_, signal);
    const int err = errno;
    if (rc == 0 || err == ESRCH) return absl::OkStatus();
    const std::string message =
        absl::StrCat("signal ", label_, " with ", SignalName(signal), ": ", std::strerror(err));
    return err == EPERM ? absl::PermissionDeniedError(message) : absl::InternalError(message);
  }
  const std::string& label() const { return label_; }

 private:
  int pid_;
  int fd_ = -1;
  bool gone_ = false;  // Had exited before we looked.
  std::string label_;
};

bool AnyAlive(const std::vector<Target>& targets) {
  return std::any_of(targets.begin(), targets.end(), [](const Target& t) { return !t.Exited(); });
}

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string HolderLine(const FileHolder& h) {
  return absl::StrCat("pid ", h.pid, " (", h.comm, ") holds ", h.path);
}

absl::Status CheckSpared(const std::vector<FileHolder>& holders, const TpuCall& call) {
  for (const FileHolder& h : holders) {
    if (Contains(call.spare_pids, h.pid) || Contains(call.spare_pgids, ::getpgid(h.pid))) {
      return absl::FailedPreconditionError(
          absl::StrCat("TPU in use by a process tpud supervises: ", HolderLine(h),
                       "; not signalled (stop its job first)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

LocalTpuControl::LocalTpuControl(TpuConfig config, std::shared_ptr<WaitClock> clock)
    : config_(std::move(config)), clock_(std::move(clock)) {}

absl::StatusOr<TpuNode> LocalTpuControl::Describe(CancelToken*) {
  return absl::UnimplementedError("tpu backend \"local\" cannot describe a node (use api or gcloud)");
}

absl::Status LocalTpuControl::Start(const TpuCall&) {
  return absl::UnimplementedError("tpu backend \"local\" cannot start a node (use api or gcloud)");
}

absl::StatusOr<std::vector<FileHolder>> LocalTpuControl::FindHolders(const TpuCall& call) const {
  std::vector<std::string> paths = ExpandGlobs(config_.device_globs);
  if (!config_.lock_file.empty()) paths.push_back(config_.lock_file);
  absl::StatusOr<HolderScan> scan = FindFileHolders(config_.proc_root, paths);
  if (!scan.ok()) return scan.status();
  if (scan->uninspectable > 0) {
    call.Report(absl::StrCat("could not inspect ", scan->uninspectable, " process(es) (permission denied)"));
  }
  std::vector<FileHolder> holders = std::move(scan->holders);
  absl::StatusOr<int> locker =
      config_.lock_file.empty() ? absl::StatusOr<int>(0) : LockHolderPid(config_.lock_file);
  const bool listed = locker.ok() && std::any_of(holders.begin(), holders.end(),
                                                 [&](const FileHolder& h) { return h.pid == *locker; });
  if (locker.ok() && *locker > 0 && !listed && *locker != ::getpid()) {
    holders.push_back(
        FileHolder{*locker, config_.lock_file + " (lockf)", ProcessName(config_.proc_root, *locker)});
  }
  return holders;
}

absl::Status LocalTpuControl::Reset(const TpuCall& call) {
  const Deadline deadline(*clock_, Seconds(config_.timeout_seconds));
  const std::vector<std::string> devices = ExpandGlobs(config_.device_globs);
  call.Report(absl::StrCat("local reset: devices [", absl::StrJoin(devices, ", "), "], lock file ",
                           config_.lock_file.empty() ? "(none)" : config_.lock_file));
  if (absl::Status s = FreeDevices(deadline, call); !s.ok()) return s;
  if (config_.lock_file.empty()) return absl::OkStatus();
  const bool existed = ::access(config_.lock_file.c_str(), F_OK) == 0;
  if (absl::Status s = RemoveStaleLockFile(config_.lock_file, config_.proc_root); !s.ok()) return s;
  if (existed) call.Report("removed stale lock file " + config_.lock_file);
  return absl::OkStatus();
}

absl::Status LocalTpuControl::FreeDevices(const Deadline& deadline, const TpuCall& call) {
  for (int round = 0;; ++round) {
    absl::StatusOr<std::vector<FileHolder>> holders = FindHolders(call);
    if (!holders.ok()) return holders.status();
    if (holders->empty()) {
      call.Report(round == 0 ? "no process holds the TPU" : "TPU devices free");
      return absl::OkStatus();
    }
    for (const FileHolder& h : *holders) call.Report(HolderLine(h));
    if (absl::Status s = CheckSpared(*holders, call); !s.ok()) return s;
    if (round > 0 && deadline.Expired()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "TPU still held after ", FormatSeconds(deadline.Elapsed()), ": ", HolderLine(holders->front())));
    }
    if (absl::Status s = StopHolders(*holders, deadline, call); !s.ok()) return s;
  }
}

absl::Status LocalTpuControl::StopHolders(const std::vector<FileHolder>& holders, const Deadline& deadline,
                                          const TpuCall& call) {
  std::vector<Target> targets;
  std::vector<int> seen;
  for (const FileHolder& h : holders) {
    if (Contains(seen, h.pid)) continue;
    seen.push_back(h.pid);
    targets.emplace_back(h);
  }
  const auto poll = Deadline::ToDuration(Seconds(config_.local_poll_interval_seconds));
  for (int signal : config_.stop_signals) {
    for (const Target& t : targets) {
      if (t.Exited()) continue;
      if (absl::Status s = t.Signal(signal); !s.ok()) return s;
      call.Report(absl::StrCat("sent ", SignalName(signal), " to ", t.label()));
    }
    const Deadline grace(*clock_,
                         std::min<Seconds>(Seconds(config_.stop_grace_seconds), deadline.Remaining()));
    while (AnyAlive(targets) && !grace.Expired()) {
      if (absl::Status s = grace.SleepAtMost(poll, call.cancel); !s.ok()) return s;
    }
    if (!AnyAlive(targets)) return absl::OkStatus();
  }
  for (const Target& t : targets) {
    if (!t.Exited()) {
      return absl::DeadlineExceededError(absl::StrCat(t.label(), " still running after ",
                                                      SignalName(config_.stop_signals.back()), " and ",
                                                      FormatSeconds(Seconds(config_.stop_grace_seconds))));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpud
