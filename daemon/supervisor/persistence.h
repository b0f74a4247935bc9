// Between the supervisor's in-memory jobs and incidents and the state store's
// records (daemon/state/state_store.h).
#pragma once

#include <optional>
#include <vector>

#include "daemon/state/state_store.h"
#include "daemon/supervisor/job.h"

namespace tpud {

// The record that lets a restarted tpud carry the job on: intent, counters,
// the running attempt. `spec_yaml` is kept for jobs not in the config.
JobRecord ToJobRecord(const JobSnapshot& snapshot, bool desired_running, const std::string& spec_yaml);

// The incident as stored (class/action by name, times as Unix ms); `id` is the
// store's id (0 for a new one).
IncidentRecord ToIncidentRecord(const Incident& incident, std::int64_t id);
// Back again; `local_id` numbers it within its job.
Incident FromIncidentRecord(const IncidentRecord& record, std::int64_t local_id);

// "running" -> kRunning; nullopt for an unknown name.
std::optional<JobState> ParseJobState(const std::string& name);

}  // namespace tpud
