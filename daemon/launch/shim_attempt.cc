#include "daemon/launch/shim_attempt.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/process/attempt_cgroup.h"
#include "daemon/process/log_file.h"
#include "daemon/process/sweeper.h"

namespace tpud {
namespace asio = boost::asio;
namespace fs = std::filesystem;
using shim::FrameStream;
using shim::FrameType;

namespace {

constexpr std::chrono::milliseconds kReconnectDelay{200};

// A pidfd for `who` once it is verified to be that very process; -1 when it
// is gone (or pidfd_open failed, and then signals are sent by pid alone).
int OpenVerifiedPidfd(const ProcessIdentity& who) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, who.pid, 0));
  if (fd < 0) return -1;
  // Checked after opening: if the pid was reused in between, the start time
  // read now is the newcomer's and cannot match.
  if (!IsSameProcess(who)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool PidfdExited(int fd) {
  pollfd probe{fd, POLLIN, 0};
  return ::poll(&probe, 1, 0) > 0;
}

}  // namespace

// The state of one attempt, shared with pending handlers so they never touch
// freed memory after the ShimAttempt is destroyed.
class ShimSession : public std::enable_shared_from_this<ShimSession> {
 public:
  ShimSession(asio::io_context& io, fs::path dir, const shim::ShimState& state, AttemptObserver* observer)
      : io_(io),
        dir_(std::move(dir)),
        trainer_{state.trainer_pid, state.trainer_start_ticks},
        shim_{state.shim_pid, state.shim_start_ticks},
        cgroup_(state.cgroup),
        observer_(observer),
        reconnect_timer_(io) {
    if (trainer_.pid > 0 && trainer_.start_ticks != 0) trainer_pidfd_ = OpenVerifiedPidfd(trainer_);
  }
  ~ShimSession() {
    if (trainer_pidfd_ >= 0) ::close(trainer_pidfd_);
  }

  // The stream never calls back after Detach() closed it; while it does, the
  // session stays alive even if the observer destroys the ShimAttempt.
  void Attach(FrameStream::Socket socket) {
    FrameStream::Callbacks callbacks;
    callbacks.on_frame = [this](FrameType type, std::string_view payload) {
      auto keep_alive = shared_from_this();
      OnFrame(type, payload);
    };
    callbacks.on_closed = [this] {
      auto keep_alive = shared_from_this();
      OnDisconnected();
    };
    stream_ = FrameStream::Create(std::move(socket), std::move(callbacks));
    stream_->Start();
  }

  void PostExit(ExitStatus status) {
    asio::post(io_, [self = shared_from_this(), status = std::move(status)] {
      self->Finish(status, /*durable=*/true);
    });
  }

  void PostOrphaned() {
    asio::post(io_, [self = shared_from_this()] { self->EndOrphan(); });
  }

  // Stops all callbacks; the shim and the trainer keep running.
  void Detach() {
    observer_ = nullptr;
    reconnect_timer_.cancel();
    if (stream_) stream_->Close();
  }

  void Signal(int signal) {
    if (trainer_pidfd_ >= 0) {
      if (PidfdExited(trainer_pidfd_)) return;  // Ended: the shim sweeps the rest.
      if (::kill(-trainer_.pid, signal) != 0 && errno == ESRCH) ::syscall(SYS_pidfd_send_signal, trainer_pidfd_, signal, nullptr, 0);
      return;
    }
    // A protocol 1 shim (no start time to check the pid against): it signals.
    if (stream_ && stream_->open()) stream_->Send(FrameType::kSignal, shim::EncodeInt32(signal));
  }

  int pid() const { return trainer_.pid; }

 private:
  void OnFrame(FrameType type, std::string_view payload) {
    switch (type) {
      case FrameType::kOutput:
        return DeliverOutput(payload);
      case FrameType::kDropped:
        return OnDropped(shim::DecodeUint64(payload).value_or(0));
      case FrameType::kLogHealth:
        return OnLogHealth(payload);
      case FrameType::kExit:
        return OnExitFrame(payload);
      default:
        return;  // Unknown frames are skipped (protocol.h).
    }
  }

  void DeliverOutput(std::string_view data) {
    splitter_.FeedBlocks(data, [this](std::string_view lines) {
      if (observer_ != nullptr) observer_->OnOutputLines(lines);
    });
  }

  void FlushPartialLine() {
    splitter_.Flush([this](std::string_view line) {
      if (observer_ != nullptr) observer_->OnOutputLine(line);
    });
  }

  void OnDropped(std::uint64_t bytes) {
    spdlog::warn("attempt {}: {} bytes of output were not streamed (they are in the log)",
                 dir_.string(), bytes);
    splitter_ = LineSplitter();  // The line cut by the gap is not one; what follows starts one.
  }

  void OnLogHealth(std::string_view payload) {
    absl::StatusOr<shim::LogHealth> health = shim::LogHealthFromJson(payload);
    if (health.ok() && observer_ != nullptr) observer_->OnLogDropped(health->dropped_bytes, health->dropping);
  }

  void OnExitFrame(std::string_view payload) {
    absl::StatusOr<ExitStatus> status = shim::ExitStatusFromJson(payload);
    if (!status.ok()) return OnDisconnected();  // Fall back to exit.json.
    Finish(*status, /*durable=*/true);
  }

  // The shim closed without an exit frame: exit.json is the truth; with none,
  // a live shim is reconnected to and a dead one's attempt is ended.
  void OnDisconnected() {
    if (observer_ == nullptr) return;
    absl::StatusOr<std::string> text = shim::ReadFile(dir_ / shim::kExitFile);
    absl::StatusOr<ExitStatus> status =
        text.ok() ? shim::ExitStatusFromJson(*text) : absl::StatusOr<ExitStatus>(text.status());
    if (status.ok()) return Finish(*status, /*durable=*/true);
    if (shim_.pid > 0 && IsRunning(shim_)) return ReconnectLater();
    EndOrphan();
  }

  void ReconnectLater() {
    reconnect_timer_.expires_after(kReconnectDelay);
    reconnect_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->observer_ == nullptr) return;
      FrameStream::Socket socket(self->io_);
      boost::system::error_code connect_ec;
      socket.connect(asio::local::stream_protocol::endpoint((self->dir_ / shim::kSocketFile).string()),
                     connect_ec);
      if (!connect_ec) return self->Attach(std::move(socket));
      self->OnDisconnected();  // Exit written meanwhile, shim died, or retry.
    });
  }

  // The shim died without recording an exit: end what is left of the
  // attempt, wait until it is gone, then report.
  void EndOrphan() {
    if (observer_ == nullptr || ending_) return;
    ending_ = true;
    if (stream_) stream_->Close();
    if (trainer_.start_ticks == 0) {  // A protocol 1 shim: the pid cannot be told from a newcomer's.
      ExitStatus lost;
      lost.spawn_error = absl::StrCat("tpud-shim (pid ", shim_.pid, ") died without an exit status; "
                                      "its trainer (pid ", trainer_.pid, ") may still be running");
      return Finish(lost, /*durable=*/false);
    }
    spdlog::error("attempt {}: tpud-shim (pid {}) is gone without an exit status; killing what is left "
                  "of the attempt (trainer pid {})",
                  dir_.string(), shim_.pid, trainer_.pid);
    SweepUntilGone(
        io_, absl::StrCat("attempt ", dir_.string()),
        [self = shared_from_this()] {
          if (!self->cgroup_.empty()) (void)KillCgroup(self->cgroup_);
          KillAttemptProcesses(self->trainer_);
          return AttemptProcessesGone(self->trainer_) && (self->cgroup_.empty() || CgroupEmpty(self->cgroup_));
        },
        [self = shared_from_this()] {
          if (!self->cgroup_.empty()) (void)RemoveCgroup(self->cgroup_);
          ExitStatus lost;
          lost.spawn_error = absl::StrCat("tpud-shim (pid ", self->shim_.pid,
                                          ") died without an exit status; tpud killed what was left of "
                                          "the attempt (trainer pid ",
                                          self->trainer_.pid, ")");
          self->Finish(lost, /*durable=*/true);
        });
  }

  // `durable`: the exit is settled (recorded by the shim, or the attempt is
  // gone for sure), so the attempt dir has served its purpose once the
  // observer has it.
  void Finish(const ExitStatus& status, bool durable) {
    if (observer_ == nullptr) return;
    FlushPartialLine();
    AttemptObserver* observer = std::exchange(observer_, nullptr);
    if (stream_) stream_->Close();
    reconnect_timer_.cancel();
    const fs::path dir = dir_;  // `this` may be released inside OnExit.
    auto keep_alive = shared_from_this();
    observer->OnExit(status);
    if (durable) RemoveAttemptDir(dir);
  }

  // The shim may still be removing its socket, which can fail one pass.
  static void RemoveAttemptDir(const fs::path& dir) {
    std::error_code ec;
    for (int pass = 0; pass < 3; ++pass) {
      fs::remove_all(dir, ec);
      if (!ec) return;
    }
    spdlog::warn("attempt {}: remove: {}", dir.string(), ec.message());
  }

  asio::io_context& io_;
  fs::path dir_;
  ProcessIdentity trainer_;
  ProcessIdentity shim_;
  fs::path cgroup_;
  int trainer_pidfd_ = -1;
  AttemptObserver* observer_;
  std::shared_ptr<FrameStream> stream_;
  asio::steady_timer reconnect_timer_;
  LineSplitter splitter_;
  bool ending_ = false;
};

std::unique_ptr<ShimAttempt> ShimAttempt::Connected(asio::io_context& io, fs::path attempt_dir,
                                                    const shim::ShimState& state,
                                                    FrameStream::Socket socket,
                                                    AttemptObserver* observer) {
  auto session = std::make_shared<ShimSession>(io, std::move(attempt_dir), state, observer);
  session->Attach(std::move(socket));
  return std::make_unique<ShimAttempt>(std::move(session));
}

std::unique_ptr<ShimAttempt> ShimAttempt::Exited(asio::io_context& io, fs::path attempt_dir,
                                                 int pid, ExitStatus status,
                                                 AttemptObserver* observer) {
  shim::ShimState state;
  state.trainer_pid = pid;
  auto session = std::make_shared<ShimSession>(io, std::move(attempt_dir), state, observer);
  session->PostExit(std::move(status));
  return std::make_unique<ShimAttempt>(std::move(session));
}

std::unique_ptr<ShimAttempt> ShimAttempt::Orphaned(asio::io_context& io, fs::path attempt_dir,
                                                   const shim::ShimState& state,
                                                   AttemptObserver* observer) {
  auto session = std::make_shared<ShimSession>(io, std::move(attempt_dir), state, observer);
  session->PostOrphaned();
  return std::make_unique<ShimAttempt>(std::move(session));
}

ShimAttempt::ShimAttempt(std::shared_ptr<ShimSession> session) : session_(std::move(session)) {}
ShimAttempt::~ShimAttempt() { session_->Detach(); }
int ShimAttempt::pid() const { return session_->pid(); }

absl::Status ShimAttempt::SignalGroup(int signal) {
  session_->Signal(signal);
  return absl::OkStatus();
}

}  // namespace tpud
