// StateStore in memory, for unit tests: the SQLite store's behaviour without a file.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/state/state_store.h"

namespace tpud {
namespace {

class MemoryStateStore final : public StateStore {
 public:
  absl::Status PutJob(const JobRecord& job) override {
    if (absl::Status s = CheckJobRecord(job); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    jobs_[job.name] = job;
    return absl::OkStatus();
  }

  absl::Status Sync() override { return absl::OkStatus(); }

  absl::Status DeleteJob(const std::string& name, bool with_history) override {
    absl::MutexLock lock(&mu_);
    jobs_.erase(name);
    if (with_history) {
      std::erase_if(incidents_, [&](const auto& entry) { return entry.second.job == name; });
      std::erase_if(events_, [&](const EventRecord& event) { return event.job == name; });
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<JobRecord>> LoadJobs() override {
    absl::MutexLock lock(&mu_);
    std::vector<JobRecord> jobs;
    for (const auto& [name, job] : jobs_) jobs.push_back(job);  // std::map: ordered by name.
    return jobs;
  }

  absl::StatusOr<std::int64_t> OpenIncident(const IncidentRecord& incident) override {
    if (absl::Status s = CheckIncidentRecord(incident); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    IncidentRecord stored = incident;
    stored.id = ++last_incident_id_;
    incidents_[stored.id] = stored;
    int kept = 0;  // Newest first: drop the job's incidents past kIncidentsKeptPerJob.
    for (auto it = incidents_.rbegin(); it != incidents_.rend();) {
      if (it->second.job == stored.job && ++kept > kIncidentsKeptPerJob) {
        it = std::make_reverse_iterator(incidents_.erase(std::next(it).base()));
      } else {
        ++it;
      }
    }
    return stored.id;
  }

  absl::StatusOr<std::int64_t> AppendEvent(const EventRecord& event) override {
    if (absl::Status s = CheckEventRecord(event); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    EventRecord stored = event;
    stored.id = ++last_event_id_;
    events_.push_back(stored);
    while (events_.size() > static_cast<std::size_t>(kEventsKept)) events_.erase(events_.begin());
    return stored.id;
  }

  absl::StatusOr<std::vector<EventRecord>> ListEvents(int limit) override {
    absl::MutexLock lock(&mu_);
    const std::size_t n = limit > 0 ? std::min(events_.size(), static_cast<std::size_t>(limit)) : events_.size();
    return std::vector<EventRecord>(events_.end() - static_cast<std::ptrdiff_t>(n), events_.end());
  }

  absl::Status UpdateIncident(const IncidentRecord& incident) override {
    if (absl::Status s = CheckIncidentRecord(incident); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    auto it = incidents_.find(incident.id);
    if (it == incidents_.end()) {
      return absl::NotFoundError(absl::StrCat("incident ", incident.id, ": no such incident"));
    }
    it->second = incident;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<IncidentRecord>> ListIncidents(const std::string& job,
                                                            int limit) override {
    absl::MutexLock lock(&mu_);
    std::vector<IncidentRecord> newest_first;
    for (auto it = incidents_.rbegin(); it != incidents_.rend(); ++it) {
      if (limit > 0 && newest_first.size() == static_cast<std::size_t>(limit)) break;
      if (job.empty() || it->second.job == job) newest_first.push_back(it->second);
    }
    std::reverse(newest_first.begin(), newest_first.end());
    return newest_first;
  }

  absl::StatusOr<std::vector<IncidentRecord>> OpenIncidents() override {
    absl::MutexLock lock(&mu_);
    std::vector<IncidentRecord> open;
    for (const auto& [id, incident] : incidents_) {
      if (incident.is_open()) open.push_back(incident);
    }
    return open;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, JobRecord> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::int64_t, IncidentRecord> incidents_ ABSL_GUARDED_BY(mu_);  // Ordered by id: oldest first.
  std::int64_t last_incident_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<EventRecord> events_ ABSL_GUARDED_BY(mu_);
  std::int64_t last_event_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<StateStore> MakeMemoryStateStore() { return std::make_unique<MemoryStateStore>(); }

}  // namespace tpud
