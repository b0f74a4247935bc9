// tpud-shim's event loop: it owns one running trainer, its output and its exit.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include "daemon/core/exit_status.h"
#include "daemon/process/log_file.h"
#include "daemon/process/output_copier.h"
#include "daemon/shim/wire/frame_stream.h"
#include "daemon/shim/output_buffer.h"

namespace tpud::shim {

// A trainer the shim has started (its parent is the shim).
struct RunningTrainer {
  int pid = -1;        // Also its pgid.
  int pidfd = -1;      // Readable once it has exited.
  int output_fd = -1;  // Read end of its stdout+stderr pipe.
  std::filesystem::path cgroup;  // Its attempt cgroup; empty: none.
};

// Copies the trainer's output to its log and, through an OutputBuffer, to the
// connected daemon (protocol.h); relays the daemon's signals to the trainer's
// process group. When the trainer exits: kills what is left of the attempt
// (its process group, its cgroup, and every other child of the shim, which
// as a child subreaper inherits the trainer's orphaned descendants) and waits
// until all of it is gone, drains the pipe into the log, writes exit.json
// atomically, and only then
// reaps the trainer (until then its zombie keeps the pid and pgid from being
// reused, so a signal can never reach a stranger). Then it sends the exit
// status to the connected daemon and stops the loop once that is written, once
// the daemon disconnects, or after kExitFlushTimeout, whichever is first. With
// no daemon connected it stops at once (a later daemon reads exit.json),
// unless none has connected yet: the launching daemon connects right after
// the shim reports ready, so it waits for that (up to kExitFlushTimeout). If
// exit.json cannot be written, the shim keeps the zombie and waits for as
// long as it takes for a daemon to receive the exit status over the socket
// (unless the attempt directory is gone: then no daemon can ever connect).
//
// Thread-safety: the loop thread only. Must outlive io.run().
class ShimServer {
 public:
  using Acceptor = boost::asio::local::stream_protocol::acceptor;
  static constexpr std::chrono::seconds kExitFlushTimeout{10};

  // Takes ownership of the trainer's fds, `log` and `acceptor` (listening on
  // attempt_dir/shim.sock, which is removed when the loop stops).
  ShimServer(boost::asio::io_context& io, std::filesystem::path attempt_dir, RunningTrainer trainer,
             RotatingLogFile log, Acceptor acceptor);
  ShimServer(const ShimServer&) = delete;
  ShimServer& operator=(const ShimServer&) = delete;

  // Starts copying, accepting and watching the trainer; io.run() returns
  // once the exit has been handed over as described above.
  void Start();

 private:
  void Accept();
  void OnConnection(FrameStream::Socket socket);
  void OnFrame(FrameType type, std::string_view payload);
  void OnDisconnected();
  void DropConnection();
  void Pump();
  void OnSent();
  void OnTrainerExit();
  // One sweep of what is left of the attempt; true once nothing is.
  bool KillLeftovers();
  void OnAttemptGone();
  void SendLogHealth();
  void StartHandoverTimer();
  void Finish();

  boost::asio::io_context& io_;
  std::filesystem::path attempt_dir_;
  int pid_;
  boost::asio::posix::stream_descriptor pidfd_;
  std::shared_ptr<OutputCopier> output_;
  Acceptor acceptor_;
  boost::asio::steady_timer exit_timer_;
  OutputBuffer buffer_;
  std::shared_ptr<FrameStream> daemon_;  // The connected daemon, if any.
  std::string in_flight_;                // Output bytes being sent to it.
  bool delivered_mid_line_ = false;      // The bytes it got last did not end a line.
  std::filesystem::path cgroup_;
  ExitStatus exit_;
  std::optional<LogHealth> log_health_;  // Latest log health, not yet sent.
  bool exited_ = false;        // exit_ is set; the group is dead, the pipe drained.
  bool exit_durable_ = false;  // exit.json is written.
  bool reaped_ = false;        // pid_ is free for reuse: never signal it again.
  bool exit_sent_ = false;     // The exit frame is queued on daemon_.
  bool ever_connected_ = false;
};

}  // namespace tpud::shim
