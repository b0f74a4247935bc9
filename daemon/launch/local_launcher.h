// LocalLauncher: runs attempts as children of the daemon (Boost.Process to
// spawn, a pidfd on the asio loop to learn of the exit, a pipe for output).
#pragma once

#include <boost/asio/io_context.hpp>

#include "daemon/launch/launcher.h"

namespace tpud {

// Each attempt runs in a new process group (pgid == pid) with stdin from
// /dev/null, stdout and stderr into one pipe that the loop copies to the log
// file, the signal mask and dispositions reset, and no daemon file descriptor
// inherited. When the main process exits, any process left in its group is
// killed (so nothing holds the TPU into the next attempt), the pipe is
// drained, and only then is OnExit called.
//
// Thread-safety: Launch() and the returned Attempts are used on the thread
// running `io`; observers are called there.
class LocalLauncher final : public Launcher {
 public:
  explicit LocalLauncher(boost::asio::io_context& io) : io_(io) {}
  absl::StatusOr<std::unique_ptr<Attempt>> Launch(const LaunchSpec& spec,
                                                  AttemptObserver* observer) override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace tpud
