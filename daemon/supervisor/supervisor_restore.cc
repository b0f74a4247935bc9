// The Supervisor's side of surviving restarts: writing jobs and incidents to
// the state store as they change, and reading them back at startup.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/supervisor/persistence.h"
#include "daemon/supervisor/supervisor.h"

namespace tpud {

void Supervisor::PersistJob(const Job& job) {
  if (store_ == nullptr) return;
  const auto yaml = spec_yaml_.find(job.spec().name);
  const JobRecord record = ToJobRecord(job.Snapshot(), job.wants_running(),
                                       yaml == spec_yaml_.end() ? "" : yaml->second);
  if (absl::Status s = store_->PutJob(record); !s.ok()) {
    spdlog::error("job {}: not persisted: {}", record.name, std::string(s.message()));
  }
}

void Supervisor::SyncStore() {
  if (store_ == nullptr) return;
  if (absl::Status s = store_->Sync(); !s.ok()) {
    spdlog::error("state store sync: {}", std::string(s.message()));
  }
}

void Supervisor::PersistIncident(const Incident& incident) {
  if (store_ == nullptr) return;
  Job* job = FindJob(incident.job);
  if (job == nullptr) return;
  // The Job's own copy carries the store id, so later updates find the row.
  Incident* own = nullptr;
  for (auto& candidate : job->mutable_incidents()) {
    if (candidate.id == incident.id) own = &candidate;
  }
  if (own == nullptr) return;
  if (own->store_id == 0) {
    absl::StatusOr<std::int64_t> id = store_->OpenIncident(ToIncidentRecord(*own, 0));
    if (id.ok()) own->store_id = *id;
    if (!id.ok()) spdlog::error("incident not persisted: {}", std::string(id.status().message()));
    return;
  }
  if (absl::Status s = store_->UpdateIncident(ToIncidentRecord(*own, own->store_id)); !s.ok()) {
    spdlog::error("incident not persisted: {}", std::string(s.message()));
  }
}

absl::Status Supervisor::RestoreFromStore() {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<JobRecord>> records = store_->LoadJobs();
  if (!records.ok()) return records.status();
  for (const JobRecord& record : *records) {
    if (jobs_.count(record.name) == 0 && !record.spec_yaml.empty()) {
      absl::StatusOr<JobSpec> spec = ParseJobSpec(record.spec_yaml, record.origin, "/");
      if (!spec.ok()) {
        spdlog::error("job {}: saved spec no longer valid, not restored: {}", record.name,
                      std::string(spec.status().message()));
        continue;
      }
      spec->origin = record.origin;
      jobs_.emplace(record.name, MakeJob(std::move(*spec)));
      spec_yaml_[record.name] = record.spec_yaml;
    }
    Job* job = FindJob(record.name);
    if (job == nullptr) {
      spdlog::warn("job {}: in the state store but no longer configured; not restored", record.name);
      continue;
    }
    absl::StatusOr<std::vector<IncidentRecord>> incidents = store_->ListIncidents(record.name, 100);
    std::deque<Incident> restored;
    std::int64_t local_id = 0;
    for (const IncidentRecord& incident : incidents.ok() ? *incidents : std::vector<IncidentRecord>{}) {
      restored.push_back(FromIncidentRecord(incident, ++local_id));
    }
    restored_.insert(record.name);
    job->Restore(ParseJobState(record.state).value_or(JobState::kStopped), record.state_reason,
                 WallTime(std::chrono::milliseconds(record.state_since_unix_ms)), record.attempt,
                 record.restarts, record.attempts_total, record.restarts_by_reason, record.last_exit,
                 std::move(restored));
  }
  return absl::OkStatus();
}

void Supervisor::Resume(Reattached attempts) {
  for (auto& [name, job] : jobs_) {
    auto it = attempts.find(name);
    if (it == attempts.end()) {
      job->Resume(nullptr, 0);
    } else {
      job->Resume(std::move(it->second.second), it->second.first);
    }
  }
}

}  // namespace tpud
