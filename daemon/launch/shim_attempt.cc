#include "daemon/launch/shim_attempt.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/launch/log_file.h"
#include "daemon/shim/attempt_dir.h"

namespace tpud {
namespace asio = boost::asio;
namespace fs = std::filesystem;
using shim::FrameStream;
using shim::FrameType;

// The state of one attempt, shared with pending handlers so they never touch
// freed memory after the ShimAttempt is destroyed.
class ShimSession : public std::enable_shared_from_this<ShimSession> {
 public:
  ShimSession(asio::io_context& io, fs::path dir, int pid, AttemptObserver* observer)
      : io_(io), dir_(std::move(dir)), pid_(pid), observer_(observer) {}

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

  // Stops all callbacks; the shim and the trainer keep running.
  void Detach() {
    observer_ = nullptr;
    if (stream_) stream_->Close();
  }

  void Signal(int signal) {
    if (stream_ && stream_->open()) stream_->Send(FrameType::kSignal, shim::EncodeInt32(signal));
  }

  int pid() const { return pid_; }

 private:
  void OnFrame(FrameType type, std::string_view payload) {
    switch (type) {
      case FrameType::kOutput:
        return DeliverOutput(payload);
      case FrameType::kDropped:
        return OnDropped(shim::DecodeUint64(payload).value_or(0));
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

  void OnExitFrame(std::string_view payload) {
    absl::StatusOr<ExitStatus> status = shim::ExitStatusFromJson(payload);
    if (!status.ok()) return OnDisconnected();  // Fall back to exit.json.
    Finish(*status, /*durable=*/true);
  }

  // The shim closed without an exit frame (it was racing its own exit, or it
  // died): exit.json is the truth.
  void OnDisconnected() {
    absl::StatusOr<std::string> text = shim::ReadFile(dir_ / shim::kExitFile);
    absl::StatusOr<ExitStatus> status =
        text.ok() ? shim::ExitStatusFromJson(*text) : absl::StatusOr<ExitStatus>(text.status());
    if (status.ok()) return Finish(*status, /*durable=*/true);
    ExitStatus lost;
    lost.spawn_error = absl::StrCat(
        "tpud-shim for ", dir_.string(), " went away without an exit status (",
        status.status().message(), "); the trainer (pid ", pid_, ") may still be running");
    Finish(lost, /*durable=*/false);
  }

  // `durable`: the shim recorded this exit, so the attempt dir has served its
  // purpose once the observer has it.
  void Finish(const ExitStatus& status, bool durable) {
    if (observer_ == nullptr) return;
    FlushPartialLine();
    AttemptObserver* observer = std::exchange(observer_, nullptr);
    if (stream_) stream_->Close();
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
  int pid_;
  AttemptObserver* observer_;
  std::shared_ptr<FrameStream> stream_;
  LineSplitter splitter_;
};

std::unique_ptr<ShimAttempt> ShimAttempt::Connected(asio::io_context& io, fs::path attempt_dir,
                                                    int pid, FrameStream::Socket socket,
                                                    AttemptObserver* observer) {
  auto session = std::make_shared<ShimSession>(io, std::move(attempt_dir), pid, observer);
  session->Attach(std::move(socket));
  return std::make_unique<ShimAttempt>(std::move(session));
}

std::unique_ptr<ShimAttempt> ShimAttempt::Exited(asio::io_context& io, fs::path attempt_dir,
                                                 int pid, ExitStatus status,
                                                 AttemptObserver* observer) {
  auto session = std::make_shared<ShimSession>(io, std::move(attempt_dir), pid, observer);
  session->PostExit(std::move(status));
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
