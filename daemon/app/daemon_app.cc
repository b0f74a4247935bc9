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
#include "daemon/app/attempt_recovery.h"
#include "daemon/app/config_reloader.h"
#include "daemon/app/systemd_notify.h"
#include "daemon/app/metadata_link.h"
#include "daemon/app/slice_link.h"
#include "daemon/app/state_dir_lock.h"
#include "daemon/process/attempt_cgroup.h"
#include "daemon/app/incident_link.h"
#include "daemon/app/tpu_link.h"
#include "daemon/core/asio_clock.h"
#include "daemon/core/run_on_loop.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/launch/shim_launcher.h"
#include "daemon/metrics/metrics.h"
#include "daemon/state/state_store.h"
#include "daemon/rpc/control_server.h"
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
  // The state dir holds submitted specs with their env and every attempt's
  // spec: owner and group only (0750), whatever the umask made it.
  std::error_code ec;
  std::filesystem::permissions(config.state_dir,
                               std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                   std::filesystem::perms::group_exec,
                               ec);
  if (ec) return absl::InternalError(absl::StrCat("chmod 0750 ", config.state_dir.string(), ": ", ec.message()));
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
  // Before anything else touches the state dir, the socket or an attempt.
  absl::StatusOr<std::unique_ptr<StateDirLock>> lock = StateDirLock::Acquire(config.state_dir);
  if (!lock.ok()) return lock.status();
  if (absl::Status s = ClaimSocketPath(config.socket); !s.ok()) return s;
  std::signal(SIGPIPE, SIG_IGN);  // A vanished client must not kill the daemon.

  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenSqliteStateStore(config.state_dir);
  if (!store.ok()) return store.status();

  boost::asio::io_context io;
  AsioClock clock(io);
  std::string no_cgroup_reason;
  absl::StatusOr<std::optional<std::filesystem::path>> cgroup_root =
      ResolveCgroupRoot(config.cgroup_root, &no_cgroup_reason);
  if (!cgroup_root.ok()) return cgroup_root.status();
  if (*cgroup_root) {
    spdlog::info("each attempt runs in a cgroup of its own under {}", (*cgroup_root)->string());
  } else if (config.cgroup_root == "auto") {
    spdlog::info("attempt cgroups off: {}; attempts are ended by process group and (shim) subreaper",
                 no_cgroup_reason);
  }
  const std::filesystem::path cgroups = cgroup_root->value_or(std::filesystem::path());
  std::unique_ptr<Launcher> launcher;
  ShimLauncher* shim_launcher = nullptr;
  if (config.launcher == "shim") {
    ShimLauncher::Options options;
    options.state_dir = config.state_dir;
    options.cgroup_root = cgroups;
    auto shim = std::make_unique<ShimLauncher>(io, options);
    shim_launcher = shim.get();
    launcher = std::move(shim);
  } else {
    launcher = std::make_unique<LocalLauncher>(io, cgroups);
  }
  // Jobs run by the local launcher die with tpud's pipes: stop them first.
  const bool stop_jobs_on_exit = config.stop_jobs_on_exit || shim_launcher == nullptr;
  absl::StatusOr<TpuLink> tpu = LinkTpu(io, config);  // TPU resets and checks.
  if (!tpu.ok()) return tpu.status();
  Supervisor::Deps deps;
  deps.clock = &clock;
  deps.launcher = launcher.get();
  deps.store = store->get();
  deps.watch_file = [&io](const std::filesystem::path& file, std::function<void()> on_change) {
    auto watcher = HeartbeatWatcher::Start(io, file, std::move(on_change));
    if (!watcher.ok()) {
      spdlog::warn("{}: heartbeat not watched", std::string(watcher.status().message()));
      return std::shared_ptr<void>();
    }
    return std::shared_ptr<void>(std::move(*watcher));
  };
  tpu->Wire(config, &deps);
  // Incident bundles, captured off the loop; outlives the supervisor.
  const std::unique_ptr<IncidentCapturer> capturer =
      IncidentCapturer::Wire(io, config, tpu->recovery.get(), &deps);
  // A multi-host slice (config slice:): gang jobs agree through etcd.
  absl::StatusOr<std::unique_ptr<SliceLink>> slice = SliceLink::Create(io, config);
  if (!slice.ok()) return slice.status();
  if (*slice) (*slice)->Wire(&deps);
  Supervisor supervisor(std::move(deps), {config.log_dir, config.state_dir});
  ServiceNotifier notifier(io, [&supervisor] {
    std::string line = SummarizeJobs(supervisor.List());
    if (!supervisor.store_health().ok) line += "; state store error: " + supervisor.store_health().last_error;
    return line;
  });
  for (const JobSpec& spec : config.jobs) {
    if (absl::Status s = supervisor.AddJob(spec); !s.ok()) return s;
  }
  if (absl::Status s = supervisor.RestoreFromStore(); !s.ok()) return s;
  supervisor.Resume(shim_launcher ? ReattachAttempts(*shim_launcher, supervisor, config.state_dir)
                                  : Supervisor::Reattached{});
  MetadataLink metadata(config.gce_metadata, io, supervisor);
  if (*slice) (*slice)->Start(supervisor);  // Commits reach the jobs once the loop runs.

  std::unique_ptr<MetricsServer> metrics;
  auto loop_running = std::make_shared<std::atomic<bool>>(true);
  if (!config.metrics.listen.empty()) {
    auto started = MetricsServer::Start(
        config.metrics.listen,
        [&io, &supervisor, loop_running, recovery = tpu->recovery.get(), slice_link = slice->get()] {
          // A scrape racing shutdown gets no jobs rather than waiting forever.
          if (!loop_running->load()) return MetricsInput{};
          MetricsInput input = RunOnLoop(io, [&] {
            MetricsInput input{supervisor.List(), supervisor.store_health(), {}, {}};
            if (recovery != nullptr) input.tpu_resets = recovery->Status().resets_total;
            return input;
          });
          if (slice_link != nullptr) input.slice = slice_link->Metrics();
          return input;
        },
        TpudVersion());
    if (!started.ok()) return started.status();
    metrics = std::move(*started);
    spdlog::info("metrics on http://{}/metrics", metrics->address());
  }

  DaemonInfo info{TpudVersion(), metrics ? metrics->address() : "", config.config_path.string(),
                  ToUnixMillis(clock.WallNow()), cgroups.string()};
  PeerRegistry peers;
  SupervisorService service(io, supervisor, info, &peers);
  service.SetTpu(config.tpu.backend, tpu->recovery.get(), tpu->checks.get());
  service.SetIncidents(config.state_dir / "incidents");  // Bundles stay readable with capture off.
  if (*slice) service.SetSlice(&(*slice)->coordinator(), &(*slice)->etcd(), (*slice)->endpoints());
  absl::StatusOr<std::unique_ptr<ControlServer>> control = ControlServer::Start(config, service, peers);
  if (!control.ok()) return control.status();
  std::unique_ptr<ControlServer> server = *std::move(control);
  spdlog::info("tpud {} listening on unix:{} with {} job(s)", TpudVersion(), config.socket.string(),
               config.jobs.size());
  ConfigReloader reloader(io, supervisor, config, notifier);  // SIGHUP reloads the config.
  notifier.Ready();                                           // READY=1 once the socket listens.

  // Shutdown: (maybe) stop the jobs on the loop, then close the servers from
  // another thread (their handlers may be waiting on the loop), then end the
  // loop. Jobs under shims are left running for the next tpud to re-attach.
  std::thread closer;
  const auto close_servers = [&] {
    if (*slice) (*slice)->Stop();  // Its lease is kept: the next tpud rejoins with it.
    closer = std::thread([&] {
      supervisor.events().CloseAll();
      supervisor.output().CloseAll();
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      loop_running->store(false);
      io.stop();
    });
  };
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signo) {
        if (ec) return;
        if (closer.joinable()) {
          spdlog::warn("{}: already shutting down", SignalName(signo));
        } else if (stop_jobs_on_exit) {
          spdlog::info("{}: stopping all jobs, then exiting", SignalName(signo));
          supervisor.StopAll(absl::StrCat("tpud received ", SignalName(signo)), close_servers);
        } else {
          spdlog::info("{}: exiting; jobs keep running under their shims", SignalName(signo));
          close_servers();
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
