// ShimLauncher: runs each attempt under its own tpud-shim (daemon/shim/), the
// trainer's parent, which outlives tpud: `systemctl restart tpud`, an upgrade
// or a crash of tpud neither stops, signals nor pauses a trainer, nor breaks
// its stdout/stderr. A restarted tpud finds its attempts in
// STATE_DIR/attempts/ (ListAttemptDirs) and re-attaches (Reattach), learning
// each exit code even if the trainer ended while tpud was down. This is
// containerd's daemon/shim split (docs/runtime-v2.md); the systemd unit must
// then use KillMode=process, as containerd's does, so stopping tpud does not
// kill the shims in its cgroup.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "daemon/launch/launcher.h"

namespace tpud {

// Attempts behave as with LocalLauncher (same process setup, same errors,
// lines only after they are in the log, OnExit after all output and after the
// group's leftovers are killed) with these differences:
//  * The log is written by the shim, so it has no gap while tpud is down.
//  * Lines the trainer prints while no daemon is attached are buffered by the
//    shim (up to 4 MiB) and delivered on re-attach; beyond that they are only
//    in the log (the gap is logged as a warning). Bytes already sent to a
//    daemon that then died are not sent again.
//  * SignalGroup goes through the shim (see ShimAttempt).
//  * Destroying the Attempt, the launcher or the loop detaches: the attempt
//    keeps running. Nothing here ever kills a trainer on daemon exit.
//
// Lifetime: `io` outlives the launcher and its Attempts; an observer outlives
// its Attempt (or its OnExit).
// Thread-safety: Launch(), Reattach() and the returned Attempts are used on
// the thread running `io`; observers are called there.
class ShimLauncher final : public Launcher {
 public:
  struct Options {
    // Attempt directories live in state_dir/attempts/JOB/ATTEMPT/.
    std::filesystem::path state_dir;
    // The tpud-shim executable; empty: DefaultShimPath().
    std::filesystem::path shim_path;
    // How long a starting attempt waits for the shim to report the trainer started.
    std::chrono::milliseconds ready_timeout{10'000};
    // Where attempt cgroups are made (launch/attempt_cgroup.h); empty: none.
    std::filesystem::path cgroup_root;
    // After each launch, start the next tpud-shim ahead of need
    // (`tpud-shim --standby`), so the next launch pays neither its exec nor
    // its start-up: one idle shim per daemon, which exits when the daemon
    // goes away (its stdin closes).
    bool standby = true;
  };

  ShimLauncher(boost::asio::io_context& io, Options options);
  ~ShimLauncher() override;  // Lets the standby shim go.

  // Creates the attempt directory for (spec.job, spec.attempt), writes
  // spec.json and starts tpud-shim on it (one vfork+exec), then returns a
  // starting() Attempt: the loop is never blocked on the shim. The shim's
  // report (the trainer's pid, or its spawn error) is read on the loop, the
  // attempt connects to the shim, and OnStarted says how it went.
  // Errors returned at once: InvalidArgument (job name unusable as a
  // directory); AlreadyExists (the attempt directory exists: Reattach it or
  // remove it first); Internal or Unavailable ("tpud-shim: spawn ...": the
  // shim could not be started). Errors through OnStarted: those of
  // LocalLauncher::Launch, with the same codes and messages (NotFound
  // "spawn \"/no/such\": No such file or directory", ...; the attempt
  // directory is then removed); Internal ("tpud-shim: ...": it reported
  // nothing, or could not be reached, and then the trainer is killed and the
  // directory left for Reattach); DeadlineExceeded (no report within
  // ready_timeout; the directory is left for Reattach).
  absl::StatusOr<std::unique_ptr<Attempt>> Launch(const LaunchSpec& spec,
                                                  AttemptObserver* observer) override;

  // Re-attaches to the attempt in `attempt_dir` (one of ListAttemptDirs()),
  // typically after a daemon restart. If its shim is running, the attempt
  // goes on with the same pid and delivers further output (starting with
  // what the shim buffered while no daemon was attached) and its exit. If
  // the shim is gone and left exit.json, OnExit is delivered from it on the
  // loop (never inline). If the shim is gone without an exit.json, what is
  // left of the attempt is killed and waited for before OnExit reports the
  // loss (ShimAttempt::Orphaned). In all cases the directory is removed after
  // OnExit. The shim serves one daemon at a time: while another is attached
  // the attempt keeps retrying (ShimAttempt).
  // Errors: NotFound when neither a live shim, nor exit.json, nor state.json
  // is there (the message names the directory, the socket error and what to
  // look at: shim.log); Unavailable when the shim answers but is still
  // starting (no state.json yet: retry shortly); DataLoss when exit.json is
  // corrupt.
  absl::StatusOr<std::unique_ptr<Attempt>> Reattach(const std::filesystem::path& attempt_dir,
                                                    AttemptObserver* observer);

  // The attempt directories under state_dir that a starting daemon must
  // Reattach (or, if Reattach fails, inspect and remove), sorted.
  static std::vector<std::filesystem::path> ListAttemptDirs(const std::filesystem::path& state_dir);

 private:
  // The standby shim, told to run the attempt in `dir`; nullopt when there
  // is none or it is gone (the caller starts a shim of its own).
  std::optional<std::unique_ptr<Attempt>> StartOnStandby(const std::filesystem::path& dir,
                                                         const std::filesystem::path& cgroup,
                                                         AttemptObserver* observer);
  // Starts the next standby shim on the loop, after what runs now.
  void PrepareStandbyLater();
  void DropStandby();

  struct Standby {
    int report_fd = -1;   // Its stdout: the report, as a fresh shim's.
    int command_fd = -1;  // Its stdin: the attempt directory goes there.
  };

  boost::asio::io_context& io_;
  Options options_;
  std::optional<Standby> standby_;
  bool standby_posted_ = false;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // Posted work checks the launcher still exists.
};

// The tpud-shim next to the running executable: <dir of /proc/self/exe>/tpud-shim.
std::filesystem::path DefaultShimPath();

}  // namespace tpud
