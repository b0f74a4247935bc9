#include "daemon/core/errno_status.h"
#include "daemon/process/spawn.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/stat.h>
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
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/process/run_as.h"

extern char** environ;

namespace tpud {
namespace bp = boost::process;

namespace {

constexpr int kPipeBytes = 1 << 20;

// What the child must do that needs data: prepared by the parent before
// vfork, read (never written) by the child.
struct ChildPlan {
  const char* cgroup_procs = nullptr;  // <cgroup>/cgroup.procs, or null.
  const RunAs* run_as = nullptr;
  const gid_t* groups = nullptr;       // run_as->groups as gid_t.
  std::size_t group_count = 0;
  const char* working_dir = nullptr;   // Entered after the privileges drop.
};

// Runs in the child between vfork and exec, on the parent's memory: only
// async-signal-safe calls, no allocation, no writes the parent would see
// (except the executor's error, which is how a failure is reported).
// Credentials are changed with raw syscalls: glibc's setuid() and friends
// broadcast the change to every thread of the process (nptl's setxid), and
// after vfork "every thread" is the parent's. The kernel keeps credentials per
// thread, so the raw call changes this child alone.
struct ChildSetup {
  const ChildPlan* plan;

  template <typename Executor>
  void operator()(Executor& exec) const {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);  // SIGPIPE was ignored.
    // Nothing of the parent's (sockets, other jobs' pipes) leaks into the child.
    ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
    if (plan->cgroup_procs != nullptr) {
      // "0" moves the writing process (cgroup-v2.rst, cgroup.procs). Best
      // effort: without it the attempt still has its process group.
      const int fd = ::open(plan->cgroup_procs, O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)!::write(fd, "0", 1);
        ::close(fd);
      }
    }
    if (plan->run_as != nullptr && !DropPrivileges(*plan)) {
      // Never exec with tpud's privileges. The message fits std::string's
      // small buffer: set_error copies it without allocating.
      exec.set_error(std::error_code(errno, std::system_category()), "set uid/gid");
      ::_exit(127);
    }
    // As the job's user, never as tpud: a directory the user may not enter
    // fails the launch instead of giving it a root-only working directory.
    if (::chdir(plan->working_dir) != 0) {
      exec.set_error(std::error_code(errno, std::system_category()), "working_dir");
      ::_exit(127);
    }
  }

  static bool DropPrivileges(const ChildPlan& plan) {
    const RunAs& who = *plan.run_as;
    return ::syscall(SYS_setgroups, plan.group_count, plan.groups) == 0 &&
           ::syscall(SYS_setresgid, who.gid, who.gid, who.gid) == 0 &&
           ::syscall(SYS_setresuid, who.uid, who.uid, who.uid) == 0;
  }
};

// What systemd hands to the service itself (sd_notify(3), sd_listen_fds(3)):
// they describe tpud, and a job that used them would talk to systemd as tpud.
constexpr const char* kServiceOnlyVariables[] = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                                                 "LISTEN_FDS",    "LISTEN_PID",    "LISTEN_FDNAMES"};

// The child's environment as "KEY=VALUE" strings: this process's, without
// the service-only variables (with clean_environment, only the inherited
// ones), then HOME/USER/LOGNAME for a run_as user, then
// spec.env (which wins; empty values are kept). Built here rather than with
// bp::environment, whose lookup (basic_environment_impl::find, Boost 1.74)
// compares past the end of a shorter entry.
std::vector<std::string> BuildEnvironment(const LaunchSpec& spec) {
  std::map<std::string, std::string> vars;
  for (char** entry = ::environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    vars.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  for (const char* name : kServiceOnlyVariables) vars.erase(name);
  if (spec.clean_environment) std::erase_if(vars, [](const auto& var) { return !IsInheritedVariable(var.first); });
  if (spec.run_as) {  // login(1)'s variables for the user it runs as; spec.env may override.
    vars["HOME"] = spec.run_as->home.string();
    vars["USER"] = spec.run_as->user;
    vars["LOGNAME"] = spec.run_as->user;
  }
  for (const auto& [key, value] : spec.env) vars[key] = value;
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [key, value] : vars) out.push_back(key + "=" + value);
  return out;
}

// Points the executor at a prepared envp (parent side, before vfork).
struct UseEnvironment {
  char** envp;
  template <typename Executor>
  void operator()(Executor& exec) const {
    exec.env = envp;
  }
};

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
  // Checked as the user the attempt runs as: tpud never tells a member
  // whether a path it may not see exists (AT_EACCESS: the fsuid's view).
  ScopedFsIdentity as(spec.run_as);
  if (!as.status().ok()) return as.status();
  if (::faccessat(AT_FDCWD, exe.c_str(), X_OK, AT_EACCESS) != 0) {
    const int err = errno;
    const std::string msg = absl::StrCat("spawn \"", exe.string(), "\": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st {};
  const bool found = ::stat(spec.working_dir.c_str(), &st) == 0;
  if (!found || !S_ISDIR(st.st_mode)) {
    const int err = found ? ENOTDIR : errno;
    const std::string msg = absl::StrCat("spawn \"", spec.argv[0], "\": working_dir \"", spec.working_dir.string(),
                                         "\": ", std::strerror(err));
    return err == EACCES ? absl::PermissionDeniedError(msg) : absl::NotFoundError(msg);
  }
  return exe;
}

static absl::Status SpawnError(const std::filesystem::path& exe, absl::string_view what, int err) {
  const std::string message = absl::StrCat("spawn \"", exe.string(), "\": ", what);
  if (IsTransientErrno(err)) return absl::UnavailableError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

absl::StatusOr<SpawnedProcess> SpawnWithOutputPipe(const std::filesystem::path& exe,
                                                   const LaunchSpec& spec, bool input_pipe) {
  ChildPlan plan;
  const std::string cgroup_procs = (spec.cgroup / "cgroup.procs").string();
  if (!spec.cgroup.empty()) plan.cgroup_procs = cgroup_procs.c_str();
  const std::string working_dir = spec.working_dir.string();
  plan.working_dir = working_dir.c_str();
  std::vector<gid_t> groups;
  if (spec.run_as) {
    plan.run_as = &*spec.run_as;
    groups.assign(spec.run_as->groups.begin(), spec.run_as->groups.end());
    plan.groups = groups.data();
    plan.group_count = groups.size();
  }
  try {
    bp::pipe output;
    ::fcntl(output.native_source(), F_SETPIPE_SZ, kPipeBytes);  // Best effort; fewer wakeups.
    std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
    std::vector<std::string> env = BuildEnvironment(spec);
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (std::string& entry : env) envp.push_back(entry.data());
    envp.push_back(nullptr);
    auto start = [&](auto&& std_in) {
      return bp::child(bp::exe = exe.string(), bp::args = args,
                       bp::extend::on_setup = UseEnvironment{envp.data()},
                       // clang-format off
                       std_in, (bp::std_out & bp::std_err) > output,
                       // clang-format on
                       bp::extend::on_exec_setup = ChildSetup{&plan},
                       // vfork, as posix_spawn does: fork() copies the page tables
                       // of a daemon with gRPC's threads and maps, 2 ms per start
                       // on the restart path (README.md, Benchmarks).
                       bp::posix::use_vfork);
    };
    std::optional<bp::pipe> input;
    if (input_pipe) input.emplace();
    bp::child child = input ? start(bp::std_in < *input) : start(bp::std_in < bp::null);
    SpawnedProcess spawned;
    spawned.pid = child.id();
    child.detach();  // The caller reaps it (pidfd, waitid).
    ::setpgid(spawned.pid, spawned.pid);
    spawned.output_fd = ::fcntl(output.native_source(), F_DUPFD_CLOEXEC, 3);
    int dup_errno = errno;
    output.close();
    if (spawned.output_fd >= 0 && input) {
      spawned.input_fd = ::fcntl(input->native_sink(), F_DUPFD_CLOEXEC, 3);
      dup_errno = errno;
      if (spawned.input_fd < 0) ::close(std::exchange(spawned.output_fd, -1));
    }
    if (input) input->close();
    if (spawned.output_fd < 0) {
      ::kill(-spawned.pid, SIGKILL);
      ::waitpid(spawned.pid, nullptr, 0);
      return SpawnError(exe, absl::StrCat("dup: ", std::strerror(dup_errno)), dup_errno);
    }
    return spawned;
  } catch (const bp::process_error& e) {
    std::string what = e.what();
    // The child cannot format: it names the step, the path is added here.
    if (absl::StartsWith(what, "working_dir")) {
      what = absl::StrCat("working_dir \"", spec.working_dir.string(), "\"", what.substr(11));
    }
    return SpawnError(exe, what, e.code().value());
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
