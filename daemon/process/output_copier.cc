#include "daemon/process/output_copier.h"

#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>

#include <spdlog/spdlog.h>

namespace tpud {
namespace asio = boost::asio;

namespace {
// Per wakeup, so one chatty process cannot starve the rest of the loop.
constexpr std::size_t kMaxBytesPerWakeup = 1 << 20;
}  // namespace

std::shared_ptr<OutputCopier> OutputCopier::Create(asio::io_context& io, int pipe_fd,
                                                   RotatingLogFile log, Sink sink) {
  return std::make_shared<OutputCopier>(io, pipe_fd, std::move(log), std::move(sink));
}

OutputCopier::OutputCopier(asio::io_context& io, int pipe_fd, RotatingLogFile log, Sink sink)
    : pipe_(io, pipe_fd), log_(std::move(log)), sink_(std::move(sink)) {
  boost::system::error_code ec;
  pipe_.non_blocking(true, ec);
}

// asio registers descriptors edge-triggered and never retries a wait
// speculatively: wait only after a read has seen the pipe empty, or an edge
// may already be gone. Hence a first read before the first wait.
void OutputCopier::Start() { CopyLater(); }

void OutputCopier::CopyLater() {
  asio::post(pipe_.get_executor(), [self = shared_from_this()] {
    if (self->open_) self->CopyAndContinue();
  });
}

void OutputCopier::WaitReadable() {
  pipe_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [self = shared_from_this()](const boost::system::error_code& ec) {
                     if (!ec && self->open_) self->CopyAndContinue();
                   });
}

void OutputCopier::CopyAndContinue() {
  switch (CopyAvailable(kMaxBytesPerWakeup)) {
    case Copied::kAll:
      return WaitReadable();
    case Copied::kMore:
      return CopyLater();  // Let the rest of the loop run first.
    case Copied::kEnd:
      return;
  }
}

void OutputCopier::Drain() {
  if (open_) CopyAvailable(0);
}

OutputCopier::Copied OutputCopier::CopyAvailable(std::size_t max_bytes) {
  std::size_t copied = 0;
  while (open_) {
    if (max_bytes > 0 && copied >= max_bytes) return Copied::kMore;
    const ssize_t n = ::read(pipe_.native_handle(), buffer_.data(), buffer_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Copied::kAll;
    if (n <= 0) return Copied::kEnd;  // End of file (every writer is gone) or an error.
    const std::string_view chunk(buffer_.data(), static_cast<std::size_t>(n));
    WriteToLog(chunk);                 // A full disk must not stall or kill the job.
    if (open_ && sink_) sink_(chunk);  // The sink may Close() us.
    copied += static_cast<std::size_t>(n);
  }
  return Copied::kEnd;
}

void OutputCopier::WriteToLog(std::string_view chunk) {
  const bool was_dropping = log_.dropping();
  const absl::Status written = log_.Append(chunk);
  if (log_.dropping() != was_dropping) {  // One line per episode, at each end.
    if (log_.dropping()) {
      spdlog::warn("{}; dropping output until the log can be written again", std::string(written.message()));
    } else {
      spdlog::warn("log {}: writing again; {} bytes of output were lost", log_.path().string(),
                   log_.dropped_bytes());
    }
  }
  // The count while it grows, and the end of an episode.
  if (log_health_ && (log_.dropping() || was_dropping)) log_health_(log_.dropped_bytes(), log_.dropping());
}

void OutputCopier::Close() {
  open_ = false;  // sink_ itself stays: Close() may be running inside it.
  boost::system::error_code ec;
  pipe_.close(ec);
}

}  // namespace tpud
