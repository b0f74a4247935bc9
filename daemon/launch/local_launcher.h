// LocalLauncher: runs attempts as children of the daemon (Boost.Process to
// spawn, a pidfd on the asio loop to learn of the exit, a pipe for output).
#pragma once

#include <boost/asio/io_context.hpp>

#include "daemon/launch/launcher.h"

namespace tpud {

// Each attempt runs in a new process group (pgid == pid) with stdin from
// /dev/null, stdout and stderr into one pipe that the loop copies to the log
// file, the signal mask and dispositions reset, and no daemon file descriptor
// inherited; with a cgroup root, in a cgroup of its own too. When the main
// process exits, every process left in its group (and cgroup) is killed and
// waited for (so nothing holds the TPU into the next attempt), the pipe is
// drained, and only then is OnExit called. A descendant that left the group
// (setsid) and outlived its parent is beyond reach without a cgroup: tpud is
// not its reaper. The shim launcher, a child subreaper, has no such gap.
//
// Thread-safety: Launch() and the returned Attempts are used on the thread
// running `io`; observers are called there.
class LocalLauncher final : public Launcher {
 public:
  // `cgroup_root`: where attempt cgroups are made (launch/attempt_cgroup.h);
  // empty: none.
  explicit LocalLauncher(boost::asio::io_context& io, std::filesystem::path cgroup_root = {})
      : io_(io), cgroup_root_(std::move(cgroup_root)) {}
  absl::StatusOr<std::unique_ptr<Attempt>> Launch(const LaunchSpec& spec,
                                                  AttemptObserver* observer) override;

 private:
  boost::asio::io_context& io_;
  std::filesystem::path cgroup_root_;
};

}  // namespace tpud
