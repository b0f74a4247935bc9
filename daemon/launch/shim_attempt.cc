#include "daemon/launch/shim_attempt.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <array>
#include <cerrno>
#include <vector>
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
      absl::StatusOr<FrameStream::Socket> socket = ConnectToShim(self->io_, self->dir_);
      if (socket.ok()) return self->Attach(std::move(*socket));
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

absl::StatusOr<FrameStream::Socket> ConnectToShim(asio::io_context& io, const fs::path& attempt_dir) {
  FrameStream::Socket socket(io);
  const fs::path path = attempt_dir / shim::kSocketFile;
  boost::system::error_code ec;
  socket.connect(asio::local::stream_protocol::endpoint(path.string()), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("tpud-shim: connect ", path.string(), ": ", ec.message()));
  return socket;
}

void RemoveUnstartedAttempt(const fs::path& attempt_dir, const fs::path& cgroup) {
  std::error_code ec;
  fs::remove_all(attempt_dir, ec);
  if (!cgroup.empty()) (void)RemoveCgroup(cgroup);
}

void ReapChildLater(asio::io_context& io, int pid) {
  struct Reaper : std::enable_shared_from_this<Reaper> {
    Reaper(asio::io_context& io, int pid) : timer(io), pid(pid) {}
    void Poll() {
      if (::waitpid(pid, nullptr, WNOHANG) != 0 || ++polls > 100) return;
      timer.expires_after(std::chrono::milliseconds(100));
      timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (!ec) self->Poll();
      });
    }
    asio::steady_timer timer;
    int pid;
    int polls = 0;
  };
  std::make_shared<Reaper>(io, pid)->Poll();
}

// Reads a starting shim's report on the loop (never blocking it), then
// attaches a ShimSession to the shim, or reports why there is none.
class ShimStart : public std::enable_shared_from_this<ShimStart> {
 public:
  ShimStart(asio::io_context& io, fs::path dir, fs::path cgroup, int first_shim_pid, int report_fd,
            AttemptObserver* observer)
      : io_(io),
        dir_(std::move(dir)),
        cgroup_(std::move(cgroup)),
        first_shim_pid_(first_shim_pid),
        report_(io, report_fd),
        timer_(io),
        observer_(observer) {}

  void Begin(std::chrono::milliseconds timeout) {
    timeout_ = timeout;
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->OnTimeout();
    });
    Read();
  }

  bool finished() const { return finished_; }
  const std::shared_ptr<ShimSession>& session() const { return session_; }

  // Kept until the trainer runs: a stop during the start is not lost.
  void Signal(int signal) {
    if (session_) return session_->Signal(signal);
    if (!finished_) pending_signals_.push_back(signal);
  }

  // No callback afterwards. The shim goes on; a later tpud finds the
  // attempt directory and re-attaches (or cleans up).
  void Detach() {
    observer_ = nullptr;
    timer_.cancel();
    boost::system::error_code ec;
    report_.close(ec);
    ReapFirstShimLater();
    if (session_) session_->Detach();
  }

 private:
  static constexpr std::size_t kMaxReportBytes = 64 * 1024;

  void Read() {
    report_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](const boost::system::error_code& ec,
                                                                              std::size_t n) {
      if (ec == asio::error::operation_aborted || self->finished_) return;
      if (!ec) {
        if (self->text_.size() < kMaxReportBytes) self->text_.append(self->buffer_.data(), n);
        return self->Read();
      }
      self->OnReport();  // End of file (or a read error): the shim has said all it will.
    });
  }

  void OnTimeout() {
    if (finished_) return;
    if (first_shim_pid_ > 0) ::kill(first_shim_pid_, SIGKILL);  // A first shim process that hangs must not linger.
    Finish(absl::DeadlineExceededError(
        absl::StrCat("tpud-shim: no report within ", timeout_.count(), " ms; so far: ", text_)));
  }

  void OnReport() {
    // The first shim process exits right after forking the real one, before
    // the report's end of file: Finish's wait does not block.
    absl::StatusOr<shim::ShimReady> ready = shim::ParseReadyReport(text_);
    if (!ready.ok()) {
      RemoveUnstartedAttempt(dir_, cgroup_);  // A spawn error leaves nothing running.
      return Finish(ready.status());
    }
    absl::StatusOr<shim::ShimState> state = shim::ReadStateFile(dir_ / shim::kStateFile);
    absl::StatusOr<FrameStream::Socket> socket =
        state.ok() ? ConnectToShim(io_, dir_) : absl::StatusOr<FrameStream::Socket>(state.status());
    if (!socket.ok()) {
      // A trainer nobody watches must not run on next to a retry. Its zombie
      // stays unreaped until exit.json is written, so the pgid is still its.
      ::kill(-ready->trainer_pid, SIGKILL);
      return Finish(absl::InternalError(socket.status().message()));
    }
    session_ = std::make_shared<ShimSession>(io_, dir_, *state, observer_);
    session_->Attach(std::move(*socket));
    for (int signal : std::exchange(pending_signals_, {})) session_->Signal(signal);
    Finish(absl::OkStatus());
  }

  void Finish(const absl::Status& status) {
    finished_ = true;
    timer_.cancel();
    boost::system::error_code ec;
    report_.close(ec);
    // Exited (or SIGKILLed above): gone at once.
    if (first_shim_pid_ > 0) ::waitpid(std::exchange(first_shim_pid_, -1), nullptr, 0);
    pending_signals_.clear();
    auto keep_alive = shared_from_this();
    if (AttemptObserver* observer = std::exchange(observer_, nullptr)) observer->OnStarted(status);
  }

  // Detached mid-start: the first shim process is this process's child and
  // exits within moments; it is reaped off the loop's path.
  void ReapFirstShimLater() {
    if (first_shim_pid_ > 0) ReapChildLater(io_, std::exchange(first_shim_pid_, -1));
  }

  asio::io_context& io_;
  fs::path dir_;
  fs::path cgroup_;
  int first_shim_pid_;  // Until reaped (or handed to ReapChildLater); -1 after, or for a standby shim.
  asio::posix::stream_descriptor report_;
  asio::steady_timer timer_;
  std::chrono::milliseconds timeout_{0};
  AttemptObserver* observer_;
  std::array<char, 4096> buffer_{};
  std::string text_;
  std::vector<int> pending_signals_;
  bool finished_ = false;
  std::shared_ptr<ShimSession> session_;
};

std::unique_ptr<ShimAttempt> ShimAttempt::Starting(asio::io_context& io, fs::path attempt_dir, fs::path cgroup,
                                                   int first_shim_pid, int report_fd,
                                                   std::chrono::milliseconds ready_timeout,
                                                   AttemptObserver* observer) {
  auto start = std::make_shared<ShimStart>(io, std::move(attempt_dir), std::move(cgroup), first_shim_pid, report_fd,
                                           observer);
  start->Begin(ready_timeout);
  return std::make_unique<ShimAttempt>(std::move(start));
}

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
ShimAttempt::ShimAttempt(std::shared_ptr<ShimStart> start) : start_(std::move(start)) {}

ShimAttempt::~ShimAttempt() {
  if (start_) start_->Detach();  // Detaches its session too, if it has one.
  if (session_) session_->Detach();
}

ShimSession* ShimAttempt::Session() const { return session_ ? session_.get() : start_->session().get(); }
int ShimAttempt::pid() const { return Session() != nullptr ? Session()->pid() : 0; }
bool ShimAttempt::starting() const { return start_ && !start_->finished(); }

absl::Status ShimAttempt::SignalGroup(int signal) {
  if (start_) {
    start_->Signal(signal);
  } else {
    session_->Signal(signal);
  }
  return absl::OkStatus();
}

}  // namespace tpud
