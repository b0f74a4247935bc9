#include "daemon/app/daemon_app.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <atomic>
#include <csignal>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/app/metadata_link.h"
#include "daemon/common/asio_clock.h"
#include "daemon/common/run_on_loop.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/metrics/metrics.h"
#include "daemon/rpc/service.h"
#include "daemon/supervisor/heartbeat_watcher.h"
#include "daemon/supervisor/supervisor.h"

#ifndef TPUD_VERSION
#define TPUD_VERSION "0.0.0-dev"
#endif

namespace tpud {
namespace {

absl::Status MakeDirectories(const DaemonConfig& config) {
  for (const std::filesystem::path& dir :
       {config.state_dir, config.log_dir, config.socket.parent_path()}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// A socket file nobody answers on is left over from a crash: remove it. One
// that answers belongs to a running tpud: refuse to steal it.
absl::Status ClaimSocketPath(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return absl::OkStatus();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket: path too long: ", path.string()));
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool answered = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  if (answered) {
    return absl::AlreadyExistsError(
        absl::StrCat("socket ", path.string(), ": another tpud is already listening there"));
  }
  std::filesystem::remove(path, ec);
  return absl::OkStatus();
}

}  // namespace

const char* TpudVersion() { return TPUD_VERSION; }

absl::Status RunDaemon(const DaemonConfig& config) {
  if (absl::Status s = MakeDirectories(config); !s.ok()) return s;
  if (absl::Status s = ClaimSocketPath(config.socket); !s.ok()) return s;
  std::signal(SIGPIPE, SIG_IGN);  // A vanished client must not kill the daemon.

  boost::asio::io_context io;
  AsioClock clock(io);
  LocalLauncher launcher(io);
  Supervisor supervisor(clock, launcher, {config.log_dir, config.state_dir});
  supervisor.SetFileWatcher([&io](const std::filesystem::path& file, std::function<void()> on_change) {
    auto watcher = HeartbeatWatcher::Start(io, file, std::move(on_change));
    if (!watcher.ok()) {
      spdlog::warn("{}: heartbeat not watched", std::string(watcher.status().message()));
      return std::shared_ptr<void>();
    }
    return std::shared_ptr<void>(std::move(*watcher));
  });
  for (const JobSpec& spec : config.jobs) {
    if (absl::Status s = supervisor.AddJob(spec); !s.ok()) return s;
  }
  MetadataLink metadata(config.gce_metadata, io, supervisor);

  std::unique_ptr<MetricsServer> metrics;
  auto loop_running = std::make_shared<std::atomic<bool>>(true);
  if (!config.metrics.listen.empty()) {
    auto started = MetricsServer::Start(
        config.metrics.listen,
        [&io, &supervisor, loop_running] {
          // A scrape racing shutdown gets no jobs rather than waiting forever.
          if (!loop_running->load()) return std::vector<JobSnapshot>{};
          return RunOnLoop(io, [&] { return supervisor.List(); });
        },
        TpudVersion());
    if (!started.ok()) return started.status();
    metrics = std::move(*started);
    spdlog::info("metrics on http://{}/metrics", metrics->address());
  }

  DaemonInfo info{TpudVersion(), metrics ? metrics->address() : "", config.config_path.string(),
                  ToUnixMillis(clock.WallNow())};
  SupervisorService service(io, supervisor, info);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + config.socket.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return absl::UnavailableError(absl::StrCat("socket ", config.socket.string(), ": cannot listen"));
  spdlog::info("tpud {} listening on unix:{} with {} job(s)", TpudVersion(), config.socket.string(),
               config.jobs.size());

  // Shutdown: stop the jobs on the loop, then close the servers from another
  // thread (their handlers may be waiting on the loop), then end the loop.
  std::thread closer;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (closer.joinable()) {
          spdlog::warn("{}: already shutting down", SignalName(signo));
        } else {
          spdlog::info("{}: stopping all jobs, then exiting", SignalName(signo));
          supervisor.StopAll(absl::StrCat("tpud received ", SignalName(signo)), [&] {
            closer = std::thread([&] {
              supervisor.events().CloseAll();
              supervisor.output().CloseAll();
              server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
              loop_running->store(false);
              io.stop();
            });
          });
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  boost::asio::post(io, [&] { supervisor.StartAutostartJobs(); });
  io.run();
  if (closer.joinable()) closer.join();
  // civetweb's orderly stop takes over a second; the process is exiting, so
  // let its threads end with it.
  (void)metrics.release();
  std::error_code ec;
  std::filesystem::remove(config.socket, ec);
  spdlog::info("tpud exited cleanly");
  return absl::OkStatus();
}

}  // namespace tpud
