#include "daemon/app/reload.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace tpud {
namespace {

bool FromConfig(const JobSpec& spec) {
  return absl::StartsWith(spec.origin, "config:") || absl::StartsWith(spec.origin, kRemovedFromConfigOrigin);
}

// The top-level keys whose value differs, in the order of config.h.
std::vector<std::string> ChangedTopLevelKeys(const DaemonConfig& a, const DaemonConfig& b) {
  const std::pair<const char*, bool> keys[] = {
      {"socket", a.socket != b.socket},
      {"socket_group", a.socket_group != b.socket_group},
      {"socket_mode", a.socket_mode != b.socket_mode},
      {"state_dir", a.state_dir != b.state_dir},
      {"log_dir", a.log_dir != b.log_dir},
      {"metrics.listen", a.metrics.listen != b.metrics.listen},
      {"gce_metadata",
       a.gce_metadata.enabled != b.gce_metadata.enabled || a.gce_metadata.host != b.gce_metadata.host},
      {"launcher", a.launcher != b.launcher},
      {"stop_jobs_on_exit", a.stop_jobs_on_exit != b.stop_jobs_on_exit},
      {"cgroup_root", a.cgroup_root != b.cgroup_root},
      // The reset backend, its budget and the preflight checks are built at startup.
      {"tpu", !(a.tpu == b.tpu && a.tpu_reset == b.tpu_reset && a.tpu_preflight == b.tpu_preflight)},
      // Membership, the etcd client and the coordinator are built at startup.
      {"slice", a.slice != b.slice},
      {"incidents", a.incidents != b.incidents},
  };
  std::vector<std::string> changed;
  for (const auto& [key, differs] : keys) {
    if (differs) changed.push_back(key);
  }
  return changed;
}

// A configured job the config dropped: removed when inactive, else marked (once).
void PlanDropped(const RunningJob& job, ReloadPlan* plan) {
  if (!job.active) {
    plan->removed.push_back(job.spec.name);
    return;
  }
  if (absl::StartsWith(job.spec.origin, kRemovedFromConfigOrigin)) return;  // Already marked.
  JobSpec marked = job.spec;
  marked.origin = absl::StrCat(kRemovedFromConfigOrigin, absl::StripPrefix(job.spec.origin, "config:"));
  plan->orphaned.push_back(std::move(marked));
}

std::string Names(const std::vector<JobSpec>& specs) {
  return absl::StrJoin(specs, ", ", [](std::string* out, const JobSpec& s) { out->append(s.name); });
}

}  // namespace

ReloadPlan PlanReload(const DaemonConfig& running, const DaemonConfig& next,
                      const std::vector<RunningJob>& jobs) {
  ReloadPlan plan;
  std::map<std::string, const RunningJob*> by_name;
  for (const RunningJob& job : jobs) by_name[job.spec.name] = &job;
  std::map<std::string, bool> configured;
  for (const JobSpec& spec : next.jobs) {
    configured[spec.name] = true;
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      plan.added.push_back(spec);
    } else if (!(it->second->spec == spec)) {
      plan.changed.push_back(spec);
    }
  }
  for (const RunningJob& job : jobs) {
    if (FromConfig(job.spec) && !configured.count(job.spec.name)) PlanDropped(job, &plan);
  }
  plan.restart_needed = ChangedTopLevelKeys(running, next);
  return plan;
}

std::string DescribePlan(const ReloadPlan& plan) {
  std::vector<std::string> parts;
  if (!plan.added.empty()) parts.push_back(absl::StrCat("added ", Names(plan.added)));
  if (!plan.changed.empty()) parts.push_back(absl::StrCat("changed ", Names(plan.changed)));
  if (!plan.removed.empty()) parts.push_back(absl::StrCat("removed ", absl::StrJoin(plan.removed, ", ")));
  if (!plan.orphaned.empty()) {
    parts.push_back(absl::StrCat("kept running ", Names(plan.orphaned), " (removed from the config)"));
  }
  if (!plan.restart_needed.empty()) {
    parts.push_back(
        absl::StrCat("unchanged until tpud restarts: ", absl::StrJoin(plan.restart_needed, ", ")));
  }
  return parts.empty() ? "no changes" : absl::StrJoin(parts, "; ");
}

}  // namespace tpud
