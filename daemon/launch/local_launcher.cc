#include "daemon/launch/local_launcher.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/launch/log_file.h"

namespace tpud {
namespace bp = boost::process;
namespace asio = boost::asio;

namespace {

constexpr std::size_t kReadChunkBytes = 128 * 1024;
constexpr int kPipeBytes = 1 << 20;

// The I/O of one attempt. Shared with pending asio handlers so they never
// touch freed memory after the Attempt is destroyed.
class AttemptIo : public std::enable_shared_from_this<AttemptIo> {
 public:
  AttemptIo(asio::io_context& io, int pid, int pidfd, int pipe_fd, RotatingLogFile log,
            AttemptObserver* observer)
      : pid_(pid), pidfd_(io, pidfd), pipe_(io, pipe_fd), log_(std::move(log)), observer_(observer) {}

  void Begin() {
    ReadMore();
    pidfd_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](const boost::system::error_code& ec) {
                        if (!ec) self->OnProcessExit();
                      });
  }

  // Stops all callbacks; the process keeps running.
  void Detach() {
    observer_ = nullptr;
    boost::system::error_code ec;
    pidfd_.close(ec);
    pipe_.close(ec);
  }

  int pid() const { return pid_; }

 private:
  void ReadMore() {
    pipe_.async_read_some(asio::buffer(buffer_),
                          [self = shared_from_this()](const boost::system::error_code& ec,
                                                      std::size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(const boost::system::error_code& ec, std::size_t n) {
    if (n > 0) Deliver(std::string_view(buffer_.data(), n));
    if (!ec) ReadMore();
  }

  void Deliver(std::string_view data) {
    (void)log_.Append(data);  // A full disk must not stall or kill the job.
    if (observer_ == nullptr) return;
    splitter_.Feed(data, [this](std::string_view line) {
      if (observer_ != nullptr) observer_->OnOutputLine(line);
    });
  }

  void OnProcessExit() {
    // Leftover members of the group (workers, forks) must not outlive the
    // attempt: they would hold the TPU and the pipe. The zombie leader keeps
    // the pgid reserved until we reap it below.
    ::kill(-pid_, SIGKILL);
    int wait_status = 0;
    ExitStatus status;
    if (::waitpid(pid_, &wait_status, WNOHANG) == pid_) {
      status = ExitStatusFromWaitStatus(wait_status);
    } else {
      status.spawn_error = "exit status unavailable";
    }
    DrainPipe();
    splitter_.Flush([this](std::string_view line) {
      if (observer_ != nullptr) observer_->OnOutputLine(line);
    });
    AttemptObserver* observer = observer_;
    Detach();
    if (observer != nullptr) observer->OnExit(status);
  }

  // Everything the dead processes wrote is already in the pipe: read it now.
  void DrainPipe() {
    boost::system::error_code ec;
    pipe_.non_blocking(true, ec);
    while (!ec) {
      const std::size_t n = pipe_.read_some(asio::buffer(buffer_), ec);
      if (n > 0) Deliver(std::string_view(buffer_.data(), n));
    }
  }

  int pid_;
  asio::posix::stream_descriptor pidfd_;
  asio::posix::stream_descriptor pipe_;
  RotatingLogFile log_;
  AttemptObserver* observer_;
  LineSplitter splitter_;
  std::array<char, kReadChunkBytes> buffer_{};
};

class LocalAttempt final : public Attempt {
 public:
  explicit LocalAttempt(std::shared_ptr<AttemptIo> io) : io_(std::move(io)) {}
  ~LocalAttempt() override { io_->Detach(); }
  int pid() const override { return io_->pid(); }
  absl::Status SignalGroup(int signal) override {
    if (::kill(-io_->pid(), signal) != 0 && errno != ESRCH) {
      return absl::InternalError(absl::StrCat("kill(-", io_->pid(), ", ", SignalName(signal),
                                              "): ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<AttemptIo> io_;
};

// Runs in the child between fork and exec: only async-signal-safe calls.
struct ChildSetup {
  template <typename Executor>
  void operator()(Executor&) const {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);  // SIGPIPE was ignored.
    // Nothing of the daemon's (sockets, other jobs' pipes) leaks into the job.
    ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  }
};

absl::Status CheckSpawnable(const LaunchSpec& spec, std::filesystem::path& exe) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("spawn: empty command");
  }
  exe = spec.argv[0];
  if (spec.argv[0].find('/') == std::string::npos) {
    exe = bp::search_path(spec.argv[0]).string();
    if (exe.empty()) {
      return absl::NotFoundError(
          absl::StrCat("spawn \"", spec.argv[0], "\": not found in PATH"));
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
  return absl::OkStatus();
}

bp::environment BuildEnvironment(const LaunchSpec& spec) {
  bp::environment env = boost::this_process::environment();
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

absl::StatusOr<std::unique_ptr<Attempt>> LocalLauncher::Launch(const LaunchSpec& spec,
                                                               AttemptObserver* observer) {
  std::filesystem::path exe;
  if (absl::Status s = CheckSpawnable(spec, exe); !s.ok()) return s;
  absl::StatusOr<RotatingLogFile> log =
      RotatingLogFile::Open(spec.log_path, spec.log_max_bytes, spec.log_backups);
  if (!log.ok()) return log.status();

  bp::pipe output;
  ::fcntl(output.native_source(), F_SETPIPE_SZ, kPipeBytes);  // Best effort; fewer wakeups.
  std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  bp::child child;
  try {
    child = bp::child(bp::exe = exe.string(), bp::args = args, BuildEnvironment(spec),
                      bp::start_dir = spec.working_dir.string(), bp::std_in < bp::null,
                      (bp::std_out & bp::std_err) > output,
                      bp::extend::on_exec_setup = ChildSetup{});
  } catch (const bp::process_error& e) {
    return absl::InternalError(absl::StrCat("spawn \"", exe.string(), "\": ", e.what()));
  }
  const int pid = child.id();
  child.detach();  // We reap it ourselves through its pidfd.
  ::setpgid(pid, pid);  // Also from the parent, so a signal sent right now reaches the group.

  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  const int read_fd = ::fcntl(output.native_source(), F_DUPFD_CLOEXEC, 3);
  output.close();
  if (pidfd < 0 || read_fd < 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return absl::InternalError(absl::StrCat("spawn: pidfd_open/dup: ", std::strerror(errno)));
  }
  auto io = std::make_shared<AttemptIo>(io_, pid, pidfd, read_fd, std::move(*log), observer);
  io->Begin();
  return std::make_unique<LocalAttempt>(std::move(io));
}

}  // namespace tpud
