// Config reload, the pure part: what changes when the daemon config is read
// again (SIGHUP, `systemctl reload tpud`). config_reloader.h applies it.
//
// The rules (README "Reloading the config"):
//   - a job the new config names and the daemon lacks is added (stopped; it
//     starts at once when autostart: true);
//   - a job whose spec differs gets the new spec: command, env, working_dir,
//     checkpoint, log and progress take effect at its next attempt, restart
//     and stop policies at once; a running attempt is never touched. This
//     holds for a submitted job the config now names, too: the config adopts it;
//   - a configured job the new config no longer names is removed when it is
//     stopped, succeeded or failed. When it is active it keeps running, marked
//     with origin "removed-from-config:FILE", and is removed by the first
//     reload that finds it inactive (or when tpud restarts);
//   - jobs submitted over the API (origin submitted:/adhoc) are left alone;
//   - top-level keys other than jobs and jobs_dir (socket, socket_group,
//     socket_mode, state_dir, log_dir, metrics, gce_metadata, launcher,
//     stop_jobs_on_exit, tpu) take effect at the next start of tpud: a reload
//     that changes one logs a warning and keeps the running value.
#pragma once

#include <string>
#include <vector>

#include "daemon/config/config.h"

namespace tpud {

// The origin prefix of an active job that a reload found removed from the config.
inline constexpr char kRemovedFromConfigOrigin[] = "removed-from-config:";

// One job as the daemon has it now.
struct RunningJob {
  JobSpec spec;         // Its current spec; spec.origin says where it came from.
  bool active = false;  // starting, running, backoff or stopping.
};

struct ReloadPlan {
  std::vector<JobSpec> added;               // Add; start when autostart.
  std::vector<JobSpec> changed;             // Replace the spec.
  std::vector<std::string> removed;         // Remove (inactive).
  std::vector<JobSpec> orphaned;            // Keep running; spec with the removed-from-config origin.
  std::vector<std::string> restart_needed;  // Top-level keys whose new value waits for a restart.

  bool empty() const {
    return added.empty() && changed.empty() && removed.empty() && orphaned.empty() && restart_needed.empty();
  }
};

// The plan that takes the daemon from `running` (the config it runs with) and
// `jobs` (every job it has, any origin) to `next` (the config just loaded and
// validated). Every name appears at most once in the plan. Pure.
ReloadPlan PlanReload(const DaemonConfig& running, const DaemonConfig& next,
                      const std::vector<RunningJob>& jobs);

// One line for the log: "added b, c; changed a; removed d; kept running e
// (removed from the config)"; "no changes".
std::string DescribePlan(const ReloadPlan& plan);

}  // namespace tpud
