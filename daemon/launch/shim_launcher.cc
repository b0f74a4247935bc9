#include "daemon/core/errno_status.h"
#include "daemon/launch/shim_launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/process/attempt_cgroup.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/launch/shim_attempt.h"
#include "daemon/process/spawn.h"
#include "daemon/shim/wire/attempt_dir.h"
#include "daemon/shim/wire/protocol.h"

namespace tpud {
namespace fs = std::filesystem;
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxReportBytes = 64 * 1024;

absl::Status CreateAttemptDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("mkdir ", dir.parent_path().string()));
  if (::mkdir(dir.c_str(), 0750) == 0) return absl::OkStatus();
  if (errno == EEXIST) {
    return absl::AlreadyExistsError(absl::StrCat(
        "attempt dir ", dir.string(), " already exists: Reattach it or remove it first"));
  }
  return ErrnoStatus(errno, absl::StrCat("mkdir ", dir.string()));
}

// Everything the shim writes to `fd` until it closes it.
absl::StatusOr<std::string> ReadReport(int fd, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string report;
  char buffer[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd readable{fd, POLLIN, 0};
    const int ready = left.count() > 0 ? ::poll(&readable, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("tpud-shim: no report within ", timeout.count(), " ms; so far: ", report));
    }
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return report;  // End of file: the shim has said all it will.
    if (report.size() < kMaxReportBytes) report.append(buffer, static_cast<std::size_t>(n));
  }
}

// Starts `tpud-shim attempt_dir` and returns what it reports.
absl::StatusOr<shim::ShimReady> StartShim(const fs::path& shim_path, const fs::path& dir,
                                          std::chrono::milliseconds timeout) {
  LaunchSpec spec;
  spec.argv = {shim_path.string(), dir.string()};
  spec.working_dir = "/";  // Never keep a daemon's directory busy.
  absl::StatusOr<fs::path> exe = ResolveExecutable(spec);
  absl::StatusOr<SpawnedProcess> child =
      exe.ok() ? SpawnWithOutputPipe(*exe, spec) : absl::StatusOr<SpawnedProcess>(exe.status());
  if (!child.ok()) {  // Out of processes or fds (Unavailable): a retry may work; else tpud's install is broken.
    const bool transient = child.status().code() == absl::StatusCode::kUnavailable;
    return absl::Status(transient ? absl::StatusCode::kUnavailable : absl::StatusCode::kInternal,
                        absl::StrCat("tpud-shim: ", child.status().message()));
  }
  absl::StatusOr<std::string> report = ReadReport(child->output_fd, timeout);
  ::close(child->output_fd);
  // The first shim process exits right after forking the real one; if it
  // hangs instead, it must not block the daemon.
  if (!report.ok()) ::kill(child->pid, SIGKILL);
  ::waitpid(child->pid, nullptr, 0);
  if (!report.ok()) return report.status();
  return shim::ParseReadyReport(*report);
}

}  // namespace

fs::path DefaultShimPath() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return (ec ? fs::path("/usr/bin") : self.parent_path()) / "tpud-shim";
}

ShimLauncher::ShimLauncher(asio::io_context& io, Options options)
    : io_(io), options_(std::move(options)) {
  if (options_.shim_path.empty()) options_.shim_path = DefaultShimPath();
}

absl::StatusOr<std::unique_ptr<Attempt>> ShimLauncher::Launch(const LaunchSpec& requested,
                                                              AttemptObserver* observer) {
  absl::StatusOr<fs::path> dir = shim::AttemptDir(options_.state_dir, requested.job, requested.attempt);
  if (!dir.ok()) return dir.status();
  const LaunchSpec spec = WithAttemptCgroup(requested, options_.cgroup_root);
  absl::StatusOr<std::string> spec_json = shim::SpecToJson(spec);
  if (!spec_json.ok()) return spec_json.status();
  if (absl::Status s = CreateAttemptDir(*dir); !s.ok()) return s;
  absl::Status written = shim::WriteFileAtomically(*dir / shim::kSpecFile, *spec_json);
  absl::StatusOr<shim::ShimReady> ready =
      written.ok() ? StartShim(options_.shim_path, *dir, options_.ready_timeout)
                   : absl::StatusOr<shim::ShimReady>(written);
  if (!ready.ok()) {
    // A spawn error leaves nothing running; a silent shim may have started
    // the trainer, so its directory stays for Reattach or a human.
    if (ready.status().code() != absl::StatusCode::kDeadlineExceeded) {
      std::error_code ec;
      fs::remove_all(*dir, ec);
      if (!spec.cgroup.empty()) (void)RemoveCgroup(spec.cgroup);
    }
    return ready.status();
  }
  absl::StatusOr<shim::ShimState> state = shim::ReadStateFile(*dir / shim::kStateFile);
  absl::StatusOr<shim::FrameStream::Socket> socket = ConnectToShim(*dir);
  if (!socket.ok() || !state.ok()) {
    // A trainer nobody watches must not run on next to a retry. Its zombie
    // stays unreaped until exit.json is written, so the pgid is still its.
    ::kill(-ready->trainer_pid, SIGKILL);
    return absl::InternalError(!socket.ok() ? socket.status().message() : state.status().message());
  }
  return ShimAttempt::Connected(io_, *dir, *state, std::move(*socket), observer);
}

absl::StatusOr<shim::FrameStream::Socket> ShimLauncher::ConnectToShim(const fs::path& attempt_dir) {
  shim::FrameStream::Socket socket(io_);
  const fs::path path = attempt_dir / shim::kSocketFile;
  boost::system::error_code ec;
  socket.connect(asio::local::stream_protocol::endpoint(path.string()), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("tpud-shim: connect ", path.string(), ": ", ec.message()));
  }
  return socket;
}

absl::StatusOr<std::unique_ptr<Attempt>> ShimLauncher::Reattach(const fs::path& attempt_dir,
                                                                AttemptObserver* observer) {
  absl::StatusOr<shim::ShimState> state = shim::ReadStateFile(attempt_dir / shim::kStateFile);
  absl::StatusOr<shim::FrameStream::Socket> socket = ConnectToShim(attempt_dir);
  if (socket.ok() && state.ok()) {
    return ShimAttempt::Connected(io_, attempt_dir, *state, std::move(*socket), observer);
  }
  if (socket.ok()) {
    return absl::UnavailableError(absl::StrCat("attempt ", attempt_dir.string(),
                                               ": tpud-shim answers but is still starting (",
                                               state.status().message(), "); retry"));
  }
  absl::StatusOr<std::string> exit_json = shim::ReadFile(attempt_dir / shim::kExitFile);
  if (!exit_json.ok() && state.ok()) {
    // The shim died (SIGKILL, OOM) before it could record an exit: its
    // trainer may run on unsupervised. End it before anything else starts.
    return ShimAttempt::Orphaned(io_, attempt_dir, *state, observer);
  }
  if (!exit_json.ok()) {
    return absl::NotFoundError(
        absl::StrCat("attempt ", attempt_dir.string(), ": no live tpud-shim (",
                     socket.status().message(), ") and no ", shim::kExitFile, "; see ",
                     shim::kShimLogFile, " there (the trainer may have been orphaned)"));
  }
  int pid = -1;
  absl::StatusOr<ExitStatus> status = shim::ExitStatusFromJson(*exit_json, &pid);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat(attempt_dir.string(), "/", shim::kExitFile, ": ", status.status().message()));
  }
  return ShimAttempt::Exited(io_, attempt_dir, pid, *status, observer);
}

std::vector<fs::path> ShimLauncher::ListAttemptDirs(const fs::path& state_dir) {
  return shim::ListAttemptDirs(state_dir);
}

}  // namespace tpud
