#include "daemon/tpu/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace tpud {
namespace {

// A file descriptor closed on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

absl::Status Errno(const std::string& what, int err) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// posix_spawn attributes: own process group, empty mask, default dispositions.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup(int out_fd, int err_fd) {
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

// Appends what is readable now, keeping at most `max_bytes`; false at EOF or error.
bool ReadSome(int fd, std::string& into, std::size_t max_bytes) {
  char buffer[16384];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      const std::size_t room = max_bytes - std::min(max_bytes, into.size());
      into.append(buffer, std::min(room, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

enum class Ended { kExited, kTimeout, kCancelled, kPollFailed };

// The descriptors of one run.
struct RunFds {
  int pidfd, cancel, out, err;
};

// Waits for the child's exit while collecting its output.
Ended Supervise(const RunFds& fds, const CommandOptions& options, CommandResult& result) {
  const auto give_up = std::chrono::steady_clock::now() + options.timeout;
  bool out_open = true, err_open = true;
  while (true) {
    pollfd polled[4] = {{fds.pidfd, POLLIN, 0},
                        {fds.cancel, POLLIN, 0},
                        {out_open ? fds.out : -1, POLLIN, 0},
                        {err_open ? fds.err : -1, POLLIN, 0}};
    const auto now = std::chrono::steady_clock::now();
    if (now >= give_up) return Ended::kTimeout;  // Never early: callers compare with their deadline.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(give_up - now);
    const int wait_ms = static_cast<int>(std::min<std::int64_t>(left.count(), 1000));
    if (::poll(polled, 4, wait_ms) < 0 && errno != EINTR) return Ended::kPollFailed;
    if (polled[2].revents != 0) out_open = ReadSome(fds.out, result.stdout_text, options.max_output_bytes);
    if (polled[3].revents != 0) err_open = ReadSome(fds.err, result.stderr_text, options.max_output_bytes);
    if (polled[1].revents != 0 || (options.cancel != nullptr && options.cancel->cancelled())) {
      return Ended::kCancelled;
    }
    if (polled[0].revents != 0) {
      ReadSome(fds.out, result.stdout_text, options.max_output_bytes);  // Written before it exited.
      ReadSome(fds.err, result.stderr_text, options.max_output_bytes);
      return Ended::kExited;
    }
  }
}

// Spawns argv with stdout/stderr on the given pipe ends.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
                            const std::string& what) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  SpawnSetup setup(out_fd, err_fd);
  pid_t pid = -1;
  if (int rc = ::posix_spawnp(&pid, args[0], &setup.actions, &setup.attr, args.data(), environ); rc != 0) {
    return Errno(what, rc);
  }
  return pid;
}

// Supervises a spawned child to its end (killing its group unless it
// exited by itself) and reaps it.
Ended Collect(pid_t pid, const RunFds& fds, const CommandOptions& options, CommandResult& result) {
  std::uint64_t waker = 0;
  if (options.cancel != nullptr) {
    const int fd = fds.cancel;
    waker = options.cancel->AddWaker([fd] { (void)::eventfd_write(fd, 1); });
  }
  const bool cancelled_already = options.cancel != nullptr && waker == 0;
  const Ended ended = cancelled_already ? Ended::kCancelled : Supervise(fds, options, result);
  if (options.cancel != nullptr) options.cancel->RemoveWaker(waker);
  if (ended != Ended::kExited) ::kill(-pid, SIGKILL);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  result.status = ExitStatusFromWaitStatus(wait_status);
  return ended;
}

}  // namespace

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const CommandOptions& options) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("run: empty command");
  const std::string what = absl::StrCat("run \"", argv[0], "\"");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0) return Errno(what + ": pipe", errno);
  Fd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) return Errno(what + ": pipe", errno);
  Fd err_r(err[0]), err_w(err[1]);
  Fd cancel_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (cancel_fd.get() < 0) return Errno(what + ": eventfd", errno);
  absl::StatusOr<pid_t> pid = Spawn(argv, out_w.get(), err_w.get(), what);
  if (!pid.ok()) return pid.status();
  out_w.Reset();  // Only the child writes: EOF when it (and its heirs) close them.
  err_w.Reset();
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0)));
  if (pidfd.get() < 0) {
    const int e = errno;
    ::kill(-*pid, SIGKILL);
    ::waitpid(*pid, nullptr, 0);
    return Errno(what + ": pidfd_open", e);
  }
  CommandResult result;
  switch (Collect(*pid, RunFds{pidfd.get(), cancel_fd.get(), out_r.get(), err_r.get()}, options, result)) {
    case Ended::kExited:
      return result;
    case Ended::kTimeout:
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": killed after ", FormatSeconds(Seconds(options.timeout)), " (timeout)"));
    case Ended::kCancelled:
      return absl::CancelledError(what + ": cancelled");
    case Ended::kPollFailed:
      break;
  }
  return absl::InternalError(what + ": poll failed");
}

}  // namespace tpud
