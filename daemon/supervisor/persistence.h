// Between the supervisor's in-memory jobs and incidents and the state store's
// records (daemon/state/state_store.h).
#pragma once

#include <deque>
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

// The JobMemory a restarted tpud gives Job::Restore, from the record and the
// job's incidents (oldest first).
JobMemory ToJobMemory(const JobRecord& record, std::deque<Incident> incidents);

// A state change as stored for `tpuctl events` after a restart, and back.
EventRecord ToEventRecord(const JobEvent& event);
JobEvent FromEventRecord(const EventRecord& record);

// "running" -> kRunning; nullopt for an unknown name.
std::optional<JobState> ParseJobState(const std::string& name);

}  // namespace tpud
