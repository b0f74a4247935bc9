// The Supervisor's side of surviving restarts: writing jobs and incidents to
// the state store as they change, and reading them back at startup.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/supervisor/persistence.h"
#include "daemon/supervisor/supervisor.h"

namespace tpud {

namespace {

JobRecord RecordOf(const Job& job, bool desired_running, const std::map<std::string, std::string>& spec_yaml) {
  const auto yaml = spec_yaml.find(job.spec().name);
  JobRecord record = ToJobRecord(job.Snapshot(), desired_running, yaml == spec_yaml.end() ? "" : yaml->second);
  if (yaml != spec_yaml.end()) {  // Submitted: who it runs as may not be in its YAML (a non-root caller's).
    record.run_as_user = job.spec().user;
    record.run_as_group = job.spec().group;
  }
  return record;
}

}  // namespace

absl::Status Supervisor::NoteStore(absl::Status status, const std::string& what) {
  if (status.ok()) {
    if (!store_health_.ok) spdlog::info("state store: writing again ({})", what);
    store_health_.ok = true;
    return status;
  }
  ++store_health_.errors_total;
  store_health_.last_error = std::string(status.message());
  if (store_health_.ok) {
    spdlog::error("state store: {}: {}; what tpud does now may not survive a restart", what,
                  store_health_.last_error);
  } else {
    spdlog::debug("state store: {}: {}", what, store_health_.last_error);
  }
  store_health_.ok = false;
  return status;
}

void Supervisor::PersistJob(const Job& job) {
  if (deps_.store == nullptr) return;
  (void)NoteStore(deps_.store->PutJob(RecordOf(job, job.wants_running(), spec_yaml_)),
                  absl::StrCat("job ", job.spec().name));
}

absl::Status Supervisor::CommitIntent(const Job& job, bool desired_running) {
  if (deps_.store == nullptr) return absl::OkStatus();
  absl::Status status = NoteStore(deps_.store->PutJob(RecordOf(job, desired_running, spec_yaml_)),
                                  absl::StrCat("job ", job.spec().name));
  if (status.ok()) status = NoteStore(deps_.store->Sync(), "sync");
  if (status.ok()) return status;
  return absl::UnavailableError(absl::StrCat("state store: ", status.message(),
                                             "; the request was not carried out (it could not be recorded)"));
}

void Supervisor::PersistEvent(const JobEvent& event) {
  if (deps_.store == nullptr) return;
  (void)NoteStore(deps_.store->AppendEvent(ToEventRecord(event)).status(), absl::StrCat("event of job ", event.job));
}

void Supervisor::SyncStore() {
  if (deps_.store == nullptr) return;
  (void)NoteStore(deps_.store->Sync(), "sync");
}

void Supervisor::PersistIncident(const Incident& incident) {
  if (deps_.store == nullptr) return;
  Job* job = FindJob(incident.job);
  if (job == nullptr) return;
  // The Job's own copy carries the store id, so later updates find the row.
  Incident* own = nullptr;
  for (auto& candidate : job->mutable_incidents()) {
    if (candidate.id == incident.id) own = &candidate;
  }
  if (own == nullptr) return;
  const std::string what = absl::StrCat("incident ", incident.id, " of job ", incident.job);
  if (own->store_id == 0) {
    absl::StatusOr<std::int64_t> id = deps_.store->OpenIncident(ToIncidentRecord(*own, 0));
    if (NoteStore(id.status(), what).ok()) own->store_id = *id;
    return;
  }
  (void)NoteStore(deps_.store->UpdateIncident(ToIncidentRecord(*own, own->store_id)), what);
}

absl::Status Supervisor::RestoreFromStore() {
  if (deps_.store == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<JobRecord>> records = deps_.store->LoadJobs();
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
      if (!record.run_as_user.empty()) spec->user = record.run_as_user;
      if (!record.run_as_group.empty()) spec->group = record.run_as_group;
      jobs_.emplace(record.name, MakeJob(std::move(*spec)));
      spec_yaml_[record.name] = record.spec_yaml;
    }
    Job* job = FindJob(record.name);
    if (job == nullptr) {
      spdlog::warn("job {}: in the state store but no longer configured; not restored", record.name);
      continue;
    }
    absl::StatusOr<std::vector<IncidentRecord>> incidents = deps_.store->ListIncidents(record.name, 100);
    std::deque<Incident> restored;
    std::int64_t local_id = 0;
    for (const IncidentRecord& incident : incidents.ok() ? *incidents : std::vector<IncidentRecord>{}) {
      restored.push_back(FromIncidentRecord(incident, ++local_id));
    }
    restored_.insert(record.name);
    job->Restore(ToJobMemory(record, std::move(restored)));
  }
  RestoreHistory(*records);
  return absl::OkStatus();
}

// `tpuctl events` after a restart: the stored state changes and the jobs'
// incidents, in time order, numbered afresh.
void Supervisor::RestoreHistory(const std::vector<JobRecord>& records) {
  absl::StatusOr<std::vector<EventRecord>> events = deps_.store->ListEvents(static_cast<int>(options_.event_history));
  if (!NoteStore(events.status(), "read events").ok()) return;
  std::vector<std::pair<WallTime, SupervisorEvent>> merged;
  for (const EventRecord& event : *events) {
    if (jobs_.count(event.job) != 0) merged.emplace_back(WallTime(std::chrono::milliseconds(event.time_unix_ms)),
                                                         FromEventRecord(event));
  }
  for (const JobRecord& record : records) {
    if (const Job* job = FindJob(record.name)) {
      for (const Incident& incident : job->incidents()) merged.emplace_back(incident.started, incident);
    }
  }
  std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [time, event] : merged) {
    history_.push_back(NumberedEvent{next_sequence_++, std::move(event)});
    while (history_.size() > options_.event_history) history_.pop_front();
  }
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
