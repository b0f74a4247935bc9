// The daemon's side of one attempt run by a tpud-shim (used by ShimLauncher;
// not a public interface).
#pragma once

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <memory>

#include "daemon/launch/launcher.h"
#include "daemon/shim/frame_stream.h"

namespace tpud {

class ShimSession;

// An Attempt whose process is the child of a tpud-shim. Output lines and the
// exit arrive over the shim's socket (daemon/shim/protocol.h) and are
// delivered to the observer on the loop, in order, the exit last. When the
// exit has been delivered, the attempt directory is removed (after OnExit
// returns, so a daemon that crashes inside OnExit sees the exit again).
// If the connection ends without an exit frame, the exit comes from exit.json;
// without one either, OnExit reports a spawn_error saying the shim died.
//
// Destroying it detaches: the shim and the trainer keep running, and no
// callback arrives afterwards.
// Thread-safety: use only on the thread running `io`.
class ShimAttempt final : public Attempt {
 public:
  // Attached to a live shim through `socket`.
  static std::unique_ptr<ShimAttempt> Connected(boost::asio::io_context& io,
                                                std::filesystem::path attempt_dir, int pid,
                                                shim::FrameStream::Socket socket,
                                                AttemptObserver* observer);
  // The shim is gone and `status` was read from exit.json: OnExit is posted.
  static std::unique_ptr<ShimAttempt> Exited(boost::asio::io_context& io,
                                             std::filesystem::path attempt_dir, int pid,
                                             ExitStatus status, AttemptObserver* observer);

  explicit ShimAttempt(std::shared_ptr<ShimSession> session);
  ~ShimAttempt() override;
  int pid() const override;
  // Asks the shim to send `signal` to the trainer's process group (the shim
  // does it, and only while the trainer is unreaped, so the signal can never
  // reach a process that reused the pgid). Returns once the request is
  // queued. After the exit, or when the group is gone, it is a no-op: OK.
  absl::Status SignalGroup(int signal) override;

 private:
  std::shared_ptr<ShimSession> session_;
};

}  // namespace tpud
