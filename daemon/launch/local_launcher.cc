#include "daemon/core/errno_status.h"
#include "daemon/launch/local_launcher.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/process/log_file.h"
#include "daemon/process/output_copier.h"
#include "daemon/process/attempt_cgroup.h"
#include "daemon/process/log_file.h"
#include "daemon/process/process_tree.h"
#include "daemon/process/spawn.h"
#include "daemon/process/sweeper.h"

namespace tpud {
namespace asio = boost::asio;

namespace {

// The I/O of one attempt. Shared with pending asio handlers so they never
// touch freed memory after the Attempt is destroyed.
class AttemptIo : public std::enable_shared_from_this<AttemptIo> {
 public:
  AttemptIo(asio::io_context& io, const LaunchSpec& spec, int pid, int pidfd, int pipe_fd,
            RotatingLogFile log, AttemptObserver* observer)
      : io_(io),
        what_(absl::StrCat("job ", spec.job, " attempt ", spec.attempt)),
        cgroup_(spec.cgroup),
        pid_(pid),
        pidfd_(io, pidfd),
        output_(OutputCopier::Create(io, pipe_fd, std::move(log),
                                     [this](std::string_view chunk) { Deliver(chunk); })),
        observer_(observer) {
    if (const std::optional<ProcessIdentity> self = IdentifyProcess(pid)) leader_ = *self;
  }

  void Begin() {
    output_->SetLogHealth([this](std::uint64_t dropped, bool dropping) {
      if (observer_ != nullptr) observer_->OnLogDropped(dropped, dropping);
    });
    output_->Start();
    pidfd_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](const boost::system::error_code& ec) {
                        if (!ec) self->OnProcessExit();
                      });
  }

  // Stops all callbacks; the process keeps running.
  void Detach() {
    observer_ = nullptr;
    boost::system::error_code ec;
    pidfd_.close(ec);
    output_->Close();
  }

  int pid() const { return pid_; }

 private:
  void Deliver(std::string_view data) {
    if (observer_ == nullptr) return;
    splitter_.FeedBlocks(data, [this](std::string_view lines) {
      if (observer_ != nullptr) observer_->OnOutputLines(lines);
    });
  }

  void OnProcessExit() {
    // Leftover members of the group (workers, forks) must not outlive the
    // attempt: they would hold the TPU and the pipe. The zombie leader, not
    // yet reaped, keeps the pgid from being reused meanwhile.
    status_ = KillGroupAndPeekExit(pid_);
    SweepUntilGone(
        io_, what_,
        [self = shared_from_this()] {
          ::kill(-self->pid_, SIGKILL);
          if (!self->cgroup_.empty()) (void)KillCgroup(self->cgroup_);
          return AttemptProcessesGone(self->leader_) && (self->cgroup_.empty() || CgroupEmpty(self->cgroup_));
        },
        [self = shared_from_this()] { self->Finish(); });
  }

  void Finish() {
    Reap(pid_);
    if (!cgroup_.empty()) (void)RemoveCgroup(cgroup_);
    output_->Drain();  // Everything the dead processes wrote is in the pipe now.
    splitter_.Flush([this](std::string_view line) {
      if (observer_ != nullptr) observer_->OnOutputLine(line);
    });
    AttemptObserver* observer = observer_;
    Detach();
    if (observer != nullptr) observer->OnExit(status_);
  }

  asio::io_context& io_;
  std::string what_;
  std::filesystem::path cgroup_;
  ExitStatus status_;
  ProcessIdentity leader_;
  int pid_;
  asio::posix::stream_descriptor pidfd_;
  std::shared_ptr<OutputCopier> output_;
  AttemptObserver* observer_;
  LineSplitter splitter_;
};

class LocalAttempt final : public Attempt {
 public:
  explicit LocalAttempt(std::shared_ptr<AttemptIo> io) : io_(std::move(io)) {}
  ~LocalAttempt() override { io_->Detach(); }
  int pid() const override { return io_->pid(); }
  absl::Status SignalGroup(int signal) override {
    if (::kill(-io_->pid(), signal) != 0 && errno != ESRCH) {
      return absl::InternalError(absl::StrCat("kill(-", io_->pid(), ", ", SignalName(signal),
                                              "): ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<AttemptIo> io_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Attempt>> LocalLauncher::Launch(const LaunchSpec& requested,
                                                               AttemptObserver* observer) {
  absl::StatusOr<std::filesystem::path> exe = ResolveExecutable(requested);
  if (!exe.ok()) return exe.status();
  absl::StatusOr<RotatingLogFile> log = RotatingLogFile::Open(
      requested.log_path, requested.log_max_bytes, requested.log_backups, LogOwner(requested));
  if (!log.ok()) return log.status();
  const LaunchSpec spec = WithAttemptCgroup(requested, cgroup_root_);
  absl::StatusOr<SpawnedProcess> child = SpawnWithOutputPipe(*exe, spec);
  if (!child.ok()) {
    if (!spec.cgroup.empty()) (void)RemoveCgroup(spec.cgroup);
    return child.status();
  }

  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child->pid, 0));
  if (pidfd < 0) {
    const int err = errno;
    ::kill(-child->pid, SIGKILL);
    ::waitpid(child->pid, nullptr, 0);
    ::close(child->output_fd);
    return ErrnoStatus(err, "spawn: pidfd_open");
  }
  auto io = std::make_shared<AttemptIo>(io_, spec, child->pid, pidfd, child->output_fd, std::move(*log),
                                        observer);
  io->Begin();
  return std::make_unique<LocalAttempt>(std::move(io));
}

}  // namespace tpud
