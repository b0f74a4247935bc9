#include "daemon/launch/spawn.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Boost.Process 1.74 offers bp::posix::use_vfork only where its config test
// says vfork exists, a test written against the POSIX feature macros
// (vfork left POSIX in 2008) that glibc's defaults fail; glibc has vfork.
// This is the only translation unit that includes Boost.Process.
#define BOOST_POSIX_HAS_VFORK 1
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace bp = boost::process;

namespace {

constexpr int kPipeBytes = 1 << 20;

// Runs in the child between vfork and exec, on the parent's memory: only
// async-signal-safe calls, no allocation, no writes the parent would see.
struct ChildSetup {
  template <typename Executor>
  void operator()(Executor&) const {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);  // SIGPIPE was ignored.
    // Nothing of the parent's (sockets, other jobs' pipes) leaks into the child.
    ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  }
};

// What systemd hands to the service itself (sd_notify(3), sd_listen_fds(3)):
// they describe tpud, and a job that used them would talk to systemd as tpud.
constexpr const char* kServiceOnlyVariables[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                                                 "LISTEN_FDS",    "LISTEN_PID",    "LISTEN_FDNAMES"};

bp::environment BuildEnvironment(const LaunchSpec& spec) {
  bp::environment env = boost::this_process::environment();
  for (const char* name : kServiceOnlyVariables) env.erase(name);
  for (const auto& [key, value] : spec.env) {
    if (value.empty()) {
      env[key] = "";  // Boost drops empty values; set then keep the key visible.
    } else {
      env[key] = value;
    }
  }
  return env;
}

}  // namespace

absl::StatusOr<std::filesystem::path> ResolveExecutable(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("spawn: empty command");
  }
  std::filesystem::path exe = spec.argv[0];
  if (spec.argv[0].find('/') == std::string::npos) {
    exe = bp::search_path(spec.argv[0]).string();
    if (exe.empty()) {
      return absl::NotFoundError(absl::StrCat("spawn \"", spec.argv[0], "\": not found in PATH"));
    }
  } else if (exe.is_relative()) {
    exe = spec.working_dir / exe;
  }
  if (::access(exe.c_str(), X_OK) != 0) {
    const int err = errno;
    const std::string msg = absl::StrCat("spawn \"", exe.string(), "\": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(spec.working_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("spawn \"", spec.argv[0], "\": working_dir \"",
                                            spec.working_dir.string(), "\" is not a directory"));
  }
  return exe;
}

absl::StatusOr<SpawnedProcess> SpawnWithOutputPipe(const std::filesystem::path& exe,
                                                   const LaunchSpec& spec) {
  try {
    bp::pipe output;
    ::fcntl(output.native_source(), F_SETPIPE_SZ, kPipeBytes);  // Best effort; fewer wakeups.
    std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
    bp::child child(bp::exe = exe.string(), bp::args = args, BuildEnvironment(spec),
                    bp::start_dir = spec.working_dir.string(),
                    // clang-format off
                    bp::std_in < bp::null, (bp::std_out & bp::std_err) > output,
                    // clang-format on
                    bp::extend::on_exec_setup = ChildSetup{},
                    // vfork, as posix_spawn does: fork() copies the page tables
                    // of a daemon with gRPC's threads and maps, 2 ms per start
                    // on the restart path (bench/README.md).
                    bp::posix::use_vfork);
    SpawnedProcess spawned;
    spawned.pid = child.id();
    child.detach();  // The caller reaps it (pidfd, waitid).
    ::setpgid(spawned.pid, spawned.pid);
    spawned.output_fd = ::fcntl(output.native_source(), F_DUPFD_CLOEXEC, 3);
    const int dup_errno = errno;
    output.close();
    if (spawned.output_fd < 0) {
      ::kill(-spawned.pid, SIGKILL);
      ::waitpid(spawned.pid, nullptr, 0);
      return absl::InternalError(
          absl::StrCat("spawn \"", exe.string(), "\": dup: ", std::strerror(dup_errno)));
    }
    return spawned;
  } catch (const bp::process_error& e) {
    return absl::InternalError(absl::StrCat("spawn \"", exe.string(), "\": ", e.what()));
  }
}

ExitStatus ExitStatusFromSiginfo(const siginfo_t& info) {
  ExitStatus status;
  if (info.si_code == CLD_EXITED) {
    status.code = info.si_status;
  } else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
    status.signal = info.si_status;
    status.core_dumped = info.si_code == CLD_DUMPED;
  }
  return status;
}

ExitStatus KillGroupAndPeekExit(int pid) {
  // The zombie leader keeps the pgid reserved, so this cannot hit a stranger.
  ::kill(-pid, SIGKILL);
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != pid) {
    ExitStatus unavailable;
    unavailable.spawn_error = "exit status unavailable";
    return unavailable;
  }
  return ExitStatusFromSiginfo(info);
}

void Reap(int pid) {
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG);
}

}  // namespace tpud
