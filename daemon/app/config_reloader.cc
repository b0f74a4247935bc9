#include "daemon/app/config_reloader.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

// The jobs' own specs (JobSnapshot::spec fills in defaults, e.g. working_dir).
std::vector<RunningJob> RunningJobs(const Supervisor& supervisor) {
  std::vector<RunningJob> jobs;
  for (const JobSnapshot& snapshot : supervisor.List()) {
    if (const Job* job = supervisor.FindJob(snapshot.name)) jobs.push_back({job->spec(), IsActive(snapshot.state)});
  }
  return jobs;
}

// Keeps the first error in `*first`.
void Note(const absl::Status& status, const std::string& job, absl::Status* first) {
  if (status.ok()) return;
  spdlog::error("reload: job {}: {}", job, std::string(status.message()));
  if (first->ok()) *first = status;
}

}  // namespace

absl::Status ApplyReloadPlan(const ReloadPlan& plan, Supervisor& supervisor) {
  absl::Status first;
  for (const JobSpec& spec : plan.added) {
    Note(supervisor.AddJob(spec), spec.name, &first);
    if (spec.autostart)
      Note(supervisor.Start(spec.name, "autostart (added by a config reload)").status(), spec.name, &first);
  }
  for (const JobSpec& spec : plan.changed) {
    spdlog::info("reload: job {}: new spec; it applies from the next attempt", spec.name);
    Note(supervisor.ReplaceJobSpec(spec), spec.name, &first);
  }
  for (const std::string& name : plan.removed) Note(supervisor.RemoveJob(name), name, &first);
  for (const JobSpec& spec : plan.orphaned) {
    spdlog::warn(
        "reload: job {} is no longer in the config but is active: it keeps running (origin {}); "
        "the first reload after it stops removes it",
        spec.name, spec.origin);
    Note(supervisor.ReplaceJobSpec(spec), spec.name, &first);
  }
  for (const std::string& key : plan.restart_needed) {
    spdlog::warn("reload: {} changed; the new value takes effect when tpud restarts", key);
  }
  return first;
}

ConfigReloader::ConfigReloader(boost::asio::io_context& io, Supervisor& supervisor, DaemonConfig running,
                               ServiceNotifier& notifier)
    : supervisor_(supervisor),
      running_(std::move(running)),
      notifier_(notifier),
      signals_(io, SIGHUP, SIGTERM, SIGINT) {
  Wait();
}

void ConfigReloader::Wait() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    if (signo != SIGHUP) {
      shutting_down_ = true;
    } else if (shutting_down_) {
      spdlog::warn("SIGHUP: shutting down; config reload ignored");
    } else {
      (void)Reload();
    }
    Wait();
  });
}

absl::Status ConfigReloader::Reload() {
  const std::string path = running_.config_path.string();
  spdlog::info("reload: reading {}", path);
  notifier_.Reloading();
  absl::StatusOr<DaemonConfig> next = LoadDaemonConfig(running_.config_path);
  if (!next.ok()) {
    spdlog::error("reload: {}; keeping the running config", std::string(next.status().message()));
    notifier_.Reloaded(absl::StrCat("last reload failed: ", next.status().message(), "; "));
    return next.status();
  }
  // Gang specs as this worker runs them, so an unchanged one compares equal.
  for (JobSpec& spec : next->jobs) spec = supervisor_.ForThisWorker(std::move(spec));
  const ReloadPlan plan = PlanReload(running_, *next, RunningJobs(supervisor_));
  spdlog::info("reload: {}", DescribePlan(plan));
  absl::Status applied = ApplyReloadPlan(plan, supervisor_);
  notifier_.Reloaded(applied.ok() ? "" : absl::StrCat("last reload incomplete: ", applied.message(), "; "));
  return applied;
}

}  // namespace tpud
