#include "daemon/core/errno_status.h"
#include "daemon/launch/shim_launcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/process/attempt_cgroup.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/launch/shim_attempt.h"
#include "daemon/process/spawn.h"
#include "daemon/shim/wire/attempt_dir.h"

namespace tpud {
namespace fs = std::filesystem;
namespace asio = boost::asio;

namespace {

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

// Starts `tpud-shim ARG` (an attempt directory, or --standby), its stdout a
// pipe for its report.
absl::StatusOr<SpawnedProcess> SpawnShim(const fs::path& shim_path, const std::string& arg,
                                         bool input_pipe = false) {
  LaunchSpec spec;
  spec.argv = {shim_path.string(), arg};
  spec.working_dir = "/";  // Never keep a daemon's directory busy.
  absl::StatusOr<fs::path> exe = ResolveExecutable(spec);
  absl::StatusOr<SpawnedProcess> child =
      exe.ok() ? SpawnWithOutputPipe(*exe, spec, input_pipe) : absl::StatusOr<SpawnedProcess>(exe.status());
  if (!child.ok()) {  // Out of processes or fds (Unavailable): a retry may work; else tpud's install is broken.
    const bool transient = child.status().code() == absl::StatusCode::kUnavailable;
    return absl::Status(transient ? absl::StatusCode::kUnavailable : absl::StatusCode::kInternal,
                        absl::StrCat("tpud-shim: ", child.status().message()));
  }
  return child;
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

ShimLauncher::~ShimLauncher() { DropStandby(); }

void ShimLauncher::DropStandby() {
  if (!standby_) return;
  ::close(standby_->command_fd);  // End of file: the standby exits having done nothing.
  ::close(standby_->report_fd);
  standby_.reset();
}

void ShimLauncher::PrepareStandbyLater() {
  if (!options_.standby || standby_ || standby_posted_) return;
  standby_posted_ = true;
  asio::post(io_, [this, life = std::weak_ptr<int>(life_)] {
    if (life.expired()) return;
    standby_posted_ = false;
    if (standby_) return;
    absl::StatusOr<SpawnedProcess> shim = SpawnShim(options_.shim_path, "--standby", /*input_pipe=*/true);
    if (!shim.ok()) return;  // The next launch starts its own shim, and reports why that fails.
    ReapChildLater(io_, shim->pid);  // It forks and exits at once; the standby is its child.
    standby_ = Standby{shim->output_fd, shim->input_fd};
  });
}

std::optional<std::unique_ptr<Attempt>> ShimLauncher::StartOnStandby(const fs::path& dir, const fs::path& cgroup,
                                                                     AttemptObserver* observer) {
  if (!standby_ || dir.string().find('\n') != std::string::npos) return std::nullopt;
  const Standby standby = *std::exchange(standby_, std::nullopt);
  // A standby that died meanwhile (its stdin closed) fails this write with
  // EPIPE (tpud ignores SIGPIPE): a fresh shim is started instead.
  const absl::Status told = WriteAll(standby.command_fd, dir.string() + "\n", "tpud-shim --standby");
  ::close(standby.command_fd);
  if (!told.ok()) {
    ::close(standby.report_fd);
    return std::nullopt;
  }
  return ShimAttempt::Starting(io_, dir, cgroup, /*first_shim_pid=*/-1, standby.report_fd, options_.ready_timeout,
                               observer);
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
  if (written.ok()) {
    std::optional<std::unique_ptr<Attempt>> on_standby = StartOnStandby(*dir, spec.cgroup, observer);
    PrepareStandbyLater();
    if (on_standby) return std::move(*on_standby);
  }
  absl::StatusOr<SpawnedProcess> shim = written.ok() ? SpawnShim(options_.shim_path, dir->string())
                                                     : absl::StatusOr<SpawnedProcess>(written);
  if (!shim.ok()) {  // Nothing runs.
    RemoveUnstartedAttempt(*dir, spec.cgroup);
    return shim.status();
  }
  // The shim reports the trainer's pid or its spawn error as an event on the
  // loop, which goes on meanwhile.
  return ShimAttempt::Starting(io_, *dir, spec.cgroup, shim->pid, shim->output_fd, options_.ready_timeout,
                               observer);
}

absl::StatusOr<std::unique_ptr<Attempt>> ShimLauncher::Reattach(const fs::path& attempt_dir,
                                                                AttemptObserver* observer) {
  absl::StatusOr<shim::ShimState> state = shim::ReadStateFile(attempt_dir / shim::kStateFile);
  absl::StatusOr<shim::FrameStream::Socket> socket = ConnectToShim(io_, attempt_dir);
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
