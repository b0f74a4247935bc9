#include "daemon/shim/shim_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/process/attempt_cgroup.h"
#include "daemon/process/process_tree.h"
#include "daemon/process/spawn.h"
#include "daemon/process/sweeper.h"
#include "daemon/shim/wire/attempt_dir.h"

namespace tpud::shim {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr std::size_t kOutputFrameBytes = 64 * 1024;

// True when the peer of `socket` has hung up (or the socket failed).
bool PeerHungUp(int fd) {
  pollfd probe{fd, POLLRDHUP, 0};
  return ::poll(&probe, 1, 0) > 0 && (probe.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace

ShimServer::ShimServer(asio::io_context& io, std::filesystem::path attempt_dir,
                       RunningTrainer trainer, RotatingLogFile log, Acceptor acceptor)
    : io_(io),
      attempt_dir_(std::move(attempt_dir)),
      pid_(trainer.pid),
      pidfd_(io, trainer.pidfd),
      output_(OutputCopier::Create(io, trainer.output_fd, std::move(log),
                                   [this](std::string_view chunk) {
                                     buffer_.Append(chunk);
                                     Pump();
                                   })),
      acceptor_(std::move(acceptor)),
      exit_timer_(io),
      buffer_(kStreamBufferBytes),
      cgroup_(trainer.cgroup) {}

void ShimServer::Start() {
  output_->SetLogHealth([this](std::uint64_t dropped, bool dropping) {
    log_health_ = LogHealth{dropped, dropping};
    Pump();
  });
  output_->Start();
  Accept();
  pidfd_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const error_code& ec) {
    if (!ec) OnTrainerExit();
  });
}

void ShimServer::Accept() {
  acceptor_.async_accept([this](const error_code& ec, FrameStream::Socket socket) {
    if (ec) {
      if (ec != asio::error::operation_aborted) spdlog::error("accept: {}", ec.message());
      return;
    }
    OnConnection(std::move(socket));
    Accept();
  });
}

void ShimServer::OnConnection(FrameStream::Socket socket) {
  if (daemon_) {
    if (!daemon_->open() || PeerHungUp(daemon_->native_handle())) {
      spdlog::info("the previous daemon hung up; a new connection takes its place");
      DropConnection();
    } else {
      // One daemon at a time: a second one (another tpud on the same
      // state_dir) must never take over an attempt a live daemon supervises.
      spdlog::warn("refused a second daemon connection: a daemon is attached");
      boost::system::error_code ec;
      socket.close(ec);
      return;
    }
  }
  spdlog::info("daemon connected");
  ever_connected_ = true;
  daemon_ = FrameStream::Create(
      std::move(socket),
      {[this](FrameType type, std::string_view payload) { OnFrame(type, payload); },
       [this] { OnSent(); }, [this] { OnDisconnected(); }});
  daemon_->Start();
  Pump();
}

void ShimServer::OnFrame(FrameType type, std::string_view payload) {
  if (type != FrameType::kSignal) return;  // Unknown frames are skipped (protocol.h).
  const std::optional<std::int32_t> signal = DecodeInt32(payload);
  if (!signal || *signal <= 0 || *signal >= NSIG) return;
  if (reaped_) return;  // The group is gone and its pgid may be someone else's.
  spdlog::info("sending {} to process group {}", SignalName(*signal), pid_);
  ::kill(-pid_, *signal);
}

void ShimServer::OnDisconnected() {
  spdlog::info("daemon disconnected");
  DropConnection();
  if (exited_ && exit_durable_) Finish();  // A later daemon reads exit.json.
}

// Output being sent on the old connection may not have arrived: it is
// counted as dropped, and the next connection resumes at a line start.
void ShimServer::DropConnection() {
  daemon_->Close();
  daemon_.reset();
  buffer_.Disconnected(in_flight_, delivered_mid_line_);
  in_flight_.clear();
  delivered_mid_line_ = false;
  exit_sent_ = false;
}

void ShimServer::Pump() {
  if (!daemon_ || !daemon_->idle() || exit_sent_) return;
  if (log_health_) {
    daemon_->Send(FrameType::kLogHealth, LogHealthToJson(*std::exchange(log_health_, std::nullopt)));
    return;  // OnSent pumps again.
  }
  if (const std::optional<std::uint64_t> dropped = buffer_.TakeGap(); dropped && *dropped > 0) {
    spdlog::warn("{} bytes of output were not streamed to the daemon (they are in the log)",
                 *dropped);
    daemon_->Send(FrameType::kDropped, EncodeUint64(*dropped));
  }
  in_flight_ = buffer_.Take(kOutputFrameBytes);
  if (!in_flight_.empty()) {
    daemon_->Send(FrameType::kOutput, in_flight_);
  } else if (exited_) {
    daemon_->Send(FrameType::kExit, ExitStatusToJson(exit_, pid_));
    exit_sent_ = true;
  }
}

void ShimServer::OnSent() {
  if (!in_flight_.empty()) delivered_mid_line_ = in_flight_.back() != '\n';
  in_flight_.clear();
  if (exit_sent_) return Finish();
  Pump();
}

void ShimServer::OnTrainerExit() {
  exit_ = KillGroupAndPeekExit(pid_);
  SweepUntilGone(io_, absl::StrCat("attempt ", attempt_dir_.string()), [this] { return KillLeftovers(); },
                 [this] { OnAttemptGone(); });
}

bool ShimServer::KillLeftovers() {
  ::kill(-pid_, SIGKILL);  // The unreaped leader keeps the pgid ours.
  if (!cgroup_.empty()) (void)KillCgroup(cgroup_);
  bool left = !cgroup_.empty() && !CgroupEmpty(cgroup_);
  for (int child : ChildPids(::getpid())) {
    if (child == pid_) continue;  // The trainer's zombie: reaped once exit.json is written.
    ::kill(child, SIGKILL);
    if (::waitpid(child, nullptr, WNOHANG) != child) left = true;
  }
  return !left;
}

void ShimServer::OnAttemptGone() {
  if (!cgroup_.empty()) (void)RemoveCgroup(cgroup_);
  output_->Drain();
  output_->Close();
  spdlog::info("trainer {}: {}", pid_, exit_.Describe());
  const absl::Status written =
      WriteFileAtomically(attempt_dir_ / kExitFile, ExitStatusToJson(exit_, pid_));
  exit_durable_ = written.ok();
  if (exit_durable_) {
    Reap(pid_);
    reaped_ = true;
  } else if (std::error_code ec; !std::filesystem::exists(attempt_dir_, ec)) {
    spdlog::error("{}; the attempt directory is gone, so no daemon can ask",
                  std::string(written.message()));
    return Finish();
  } else {
    spdlog::error("{}; keeping the exit status until a daemon receives it",
                  std::string(written.message()));
  }
  exited_ = true;
  if (exit_durable_) {
    // With no daemon attached, a later one reads exit.json. But until some
    // daemon has connected, the launching one is about to: it must get the
    // output and the exit over the socket, as with LocalLauncher.
    if (!daemon_ && ever_connected_) return Finish();
    StartHandoverTimer();
  }
  Pump();
}

void ShimServer::StartHandoverTimer() {
  exit_timer_.expires_after(kExitFlushTimeout);
  exit_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;
    spdlog::warn("no daemon took the exit status within {}s; it is in {}",
                 kExitFlushTimeout.count(), kExitFile);
    Finish();
  });
}

void ShimServer::Finish() {
  if (!reaped_) {
    Reap(pid_);
    reaped_ = true;
  }
  error_code ec;
  acceptor_.close(ec);
  std::error_code remove_ec;
  std::filesystem::remove(attempt_dir_ / kSocketFile, remove_ec);
  if (daemon_) daemon_->Close();
  exit_timer_.cancel();
  spdlog::info("done");
  io_.stop();
}

}  // namespace tpud::shim
