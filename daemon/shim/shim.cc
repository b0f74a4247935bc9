#include "daemon/core/errno_status.h"
#include "daemon/shim/shim.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/process/log_file.h"
#include "daemon/process/process_tree.h"
#include "daemon/process/spawn.h"
#include "daemon/shim/wire/attempt_dir.h"
#include "daemon/shim/wire/protocol.h"
#include "daemon/shim/shim_server.h"

namespace tpud::shim {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using Acceptor = ShimServer::Acceptor;

// Everything that has to succeed before the shim reports ready.
struct Started {
  RunningTrainer trainer;
  std::unique_ptr<RotatingLogFile> log;
  std::unique_ptr<Acceptor> acceptor;
};

void WriteToStdout(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // Nobody is listening any more; nothing else to tell.
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

void IgnoreSignals() {
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGPIPE}) ::signal(sig, SIG_IGN);
}

// From now on nothing reaches the daemon's pipe: it sees end of file.
void RedirectStdio(const fs::path& attempt_dir) {
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const fs::path log = attempt_dir / kShimLogFile;
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(null_fd, STDOUT_FILENO);
  ::dup2(log_fd >= 0 ? log_fd : null_fd, STDERR_FILENO);
  if (log_fd >= 0) ::close(log_fd);
  ::close(null_fd);
}

absl::StatusOr<std::unique_ptr<Acceptor>> Listen(asio::io_context& io, const fs::path& path) {
  auto acceptor = std::make_unique<Acceptor>(io);
  std::error_code remove_ec;
  std::filesystem::remove(path, remove_ec);  // Left by a shim of an earlier, reused directory.
  boost::system::error_code ec;
  acceptor->open(asio::local::stream_protocol(), ec);
  if (!ec) acceptor->bind(asio::local::stream_protocol::endpoint(path.string()), ec);
  if (!ec && ::chmod(path.c_str(), 0600) != 0) ec.assign(errno, boost::system::system_category());
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("listen on ", path.string()));
  return acceptor;
}

// After the trainer is running: what else it needs before we report ready.
absl::Status FinishStart(const fs::path& attempt_dir, const LaunchSpec& spec, Started& started) {
  started.trainer.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, started.trainer.pid, 0));
  if (started.trainer.pidfd < 0) {
    return ErrnoStatus(errno, "spawn: pidfd_open");
  }
  ShimState state;
  state.protocol = kProtocolVersion;
  state.shim_pid = ::getpid();
  state.trainer_pid = started.trainer.pid;
  // The trainer is our unreaped child: its pid cannot have been reused yet.
  state.trainer_start_ticks = IdentifyProcess(started.trainer.pid).value_or(ProcessIdentity{}).start_ticks;
  state.shim_start_ticks = IdentifyProcess(::getpid()).value_or(ProcessIdentity{}).start_ticks;
  state.cgroup = spec.cgroup.string();
  started.trainer.cgroup = spec.cgroup;
  return WriteFileAtomically(attempt_dir / kStateFile, ShimStateToJson(state));
}

absl::StatusOr<Started> StartTrainer(asio::io_context& io, const fs::path& attempt_dir) {
  absl::StatusOr<LaunchSpec> spec = ReadSpecFile(attempt_dir / kSpecFile);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<fs::path> exe = ResolveExecutable(*spec);
  if (!exe.ok()) return exe.status();
  absl::StatusOr<RotatingLogFile> log =
      RotatingLogFile::Open(spec->log_path, spec->log_max_bytes, spec->log_backups, LogOwner(*spec));
  if (!log.ok()) return log.status();
  // Listen first: a failure then leaves no trainer behind.
  absl::StatusOr<std::unique_ptr<Acceptor>> acceptor = Listen(io, attempt_dir / kSocketFile);
  if (!acceptor.ok()) return acceptor.status();
  absl::StatusOr<SpawnedProcess> child = SpawnWithOutputPipe(*exe, *spec);
  if (!child.ok()) return child.status();

  Started started{{child->pid, -1, child->output_fd, {}},
                  std::make_unique<RotatingLogFile>(std::move(*log)),
                  std::move(*acceptor)};
  if (absl::Status s = FinishStart(attempt_dir, *spec, started); !s.ok()) {
    ::kill(-child->pid, SIGKILL);
    ::waitpid(child->pid, nullptr, 0);
    ::close(child->output_fd);
    if (started.trainer.pidfd >= 0) ::close(started.trainer.pidfd);
    return s;
  }
  return started;
}

int Serve(const fs::path& attempt_dir) {
  asio::io_context io;
  absl::StatusOr<Started> started = StartTrainer(io, attempt_dir);
  if (!started.ok()) {
    std::error_code ec;
    fs::remove(attempt_dir / kSocketFile, ec);
    WriteToStdout(EncodeReadyError(started.status()));
    return 1;
  }
  WriteToStdout(EncodeReady({::getpid(), started->trainer.pid}));
  RedirectStdio(attempt_dir);
  spdlog::info("attempt {}: trainer pid {} started", attempt_dir.string(), started->trainer.pid);
  ShimServer server(io, attempt_dir, started->trainer, std::move(*started->log),
                    std::move(*started->acceptor));
  server.Start();
  io.run();
  return 0;
}

// Forks; the calling process _exits 0 (the daemon reaps it), and the
// grandchild of the daemon, in a session of its own (the daemon never has to
// reap it, and nothing aimed at the daemon's process group reaches it),
// returns true. False (reported) when fork failed.
bool Detach() {
  const pid_t child = ::fork();
  if (child < 0) {
    WriteToStdout(EncodeReadyError(ErrnoStatus(errno, "tpud-shim: fork")));
    return false;
  }
  if (child > 0) ::_exit(0);  // _exit: no buffers or destructors run twice.
  ::setsid();
  // Every descendant of the trainer that outlives its own parent, even one
  // that left the trainer's process group (setsid), is reparented to us, not
  // to init, so the attempt's end can end it too (prctl(2); containerd's shim
  // and tini do the same).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  IgnoreSignals();
  return true;
}

// The first line on stdin, without its '\n' (the daemon sends one line and
// closes the pipe); nullopt at end of file first.
std::optional<std::string> ReadLine() {
  std::string text;
  char buffer[4096];
  while (text.size() < sizeof(buffer)) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    text.append(buffer, static_cast<std::size_t>(n));
    if (const std::size_t end = text.find('\n'); end != std::string::npos) return text.substr(0, end);
  }
  return std::nullopt;
}

}  // namespace

int RunShim(const fs::path& attempt_dir) {
  if (!Detach()) return 1;
  return Serve(attempt_dir);
}

int RunStandbyShim() {
  if (!Detach()) return 1;
  std::optional<std::string> attempt_dir = ReadLine();
  if (!attempt_dir || attempt_dir->empty()) return 0;  // The daemon went away, or let it go.
  return Serve(*attempt_dir);
}

}  // namespace tpud::shim
