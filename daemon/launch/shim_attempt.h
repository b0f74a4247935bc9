// The daemon's side of one attempt run by a tpud-shim (used by ShimLauncher;
// not a public interface).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <memory>

#include "daemon/launch/launcher.h"
#include "daemon/process/process_tree.h"
#include "daemon/shim/wire/attempt_dir.h"
#include "daemon/shim/wire/frame_stream.h"

namespace tpud {

class ShimSession;
class ShimStart;

// Reaps this process's child `pid`, which is about to exit, from the loop
// (a WNOHANG poll every 100 ms, for at most 10 s): never blocks.
void ReapChildLater(boost::asio::io_context& io, int pid);

// A socket connected to the shim of `attempt_dir` (its shim.sock). Errors:
// Unavailable ("tpud-shim: connect PATH: REASON").
absl::StatusOr<shim::FrameStream::Socket> ConnectToShim(boost::asio::io_context& io,
                                                        const std::filesystem::path& attempt_dir);

// Removes what was made for an attempt whose trainer never started: its
// directory and, when set, its cgroup.
void RemoveUnstartedAttempt(const std::filesystem::path& attempt_dir, const std::filesystem::path& cgroup);

// An Attempt whose process is the child of a tpud-shim. Output lines and the
// exit arrive over the shim's socket (daemon/shim/protocol.h) and are
// delivered to the observer on the loop, in order, the exit last. When the
// exit has been delivered, the attempt directory is removed (after OnExit
// returns, so a daemon that crashes inside OnExit sees the exit again).
//
// If the connection ends without an exit frame:
//  * exit.json is there: the exit comes from it;
//  * the shim is still alive (it refused this daemon while another was
//    attached, or is busy): the attempt reconnects every 200 ms, as long as
//    the shim lives;
//  * the shim is dead (killed): its trainer may still run, unsupervised. The
//    attempt kills what is left of it (its cgroup; the trainer, identified by
//    pid and start time, with its descendants and process group), waits until
//    all of it is gone, and only then reports OnExit with a spawn_error
//    saying the shim died. So no next attempt can overlap an orphan.
//
// SignalGroup signals the trainer's process group directly, after checking
// that the trainer is the same process (a pidfd opened once its start time
// matched state.json): a shim busy with the log, or dead, never delays a stop.
//
// Destroying it detaches: the shim and the trainer keep running, and no
// callback arrives afterwards.
// Thread-safety: use only on the thread running `io`.
class ShimAttempt final : public Attempt {
 public:
  // Attached to a live shim through `socket`; `state` is its state.json.
  static std::unique_ptr<ShimAttempt> Connected(boost::asio::io_context& io,
                                                std::filesystem::path attempt_dir,
                                                const shim::ShimState& state,
                                                shim::FrameStream::Socket socket,
                                                AttemptObserver* observer);
  // The shim is gone and `status` was read from exit.json: OnExit is posted.
  static std::unique_ptr<ShimAttempt> Exited(boost::asio::io_context& io,
                                             std::filesystem::path attempt_dir, int pid,
                                             ExitStatus status, AttemptObserver* observer);
  // The shim is gone without an exit.json: what is left of the attempt is
  // killed and waited for, then OnExit reports the loss (as above).
  static std::unique_ptr<ShimAttempt> Orphaned(boost::asio::io_context& io,
                                               std::filesystem::path attempt_dir,
                                               const shim::ShimState& state,
                                               AttemptObserver* observer);

  // Being started by the tpud-shim `first_shim_pid` (a child of this
  // process; -1: already reaped, a standby shim), which reports on
  // `report_fd` (owned from now on) within
  // `ready_timeout`: the report is read on the loop, and OnStarted follows
  // (see ShimLauncher::Launch for its errors). A spawn error removes the
  // attempt directory (nothing runs); a silent shim's directory is left for
  // Reattach or a person.
  static std::unique_ptr<ShimAttempt> Starting(boost::asio::io_context& io, std::filesystem::path attempt_dir,
                                               std::filesystem::path cgroup, int first_shim_pid, int report_fd,
                                               std::chrono::milliseconds ready_timeout,
                                               AttemptObserver* observer);

  explicit ShimAttempt(std::shared_ptr<ShimSession> session);
  explicit ShimAttempt(std::shared_ptr<ShimStart> start);
  ~ShimAttempt() override;
  int pid() const override;
  bool starting() const override;
  // Sends `signal` to the trainer's process group while the trainer lives;
  // a no-op (OK) once it has exited: the shim, or the cleanup above, ends
  // what is left.
  absl::Status SignalGroup(int signal) override;

 private:
  ShimSession* Session() const;  // Null while starting, or when the start failed.

  std::shared_ptr<ShimStart> start_;
  std::shared_ptr<ShimSession> session_;
};

}  // namespace tpud
