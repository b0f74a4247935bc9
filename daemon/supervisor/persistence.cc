#include "daemon/supervisor/persistence.h"

namespace tpud {

std::optional<JobState> ParseJobState(const std::string& name) {
  for (JobState state : kAllJobStates) {
    if (name == JobStateName(state)) return state;
  }
  return std::nullopt;
}

JobRecord ToJobRecord(const JobSnapshot& s, bool desired_running, const std::string& spec_yaml) {
  JobRecord record;
  record.name = s.name;
  record.spec_yaml = spec_yaml;
  record.origin = s.spec.origin;
  record.desired_running = desired_running;
  record.state = JobStateName(s.state);
  record.state_reason = s.reason;
  record.state_since_unix_ms = ToUnixMillis(s.state_since);
  record.attempt = s.attempt;
  record.restarts = s.restarts;
  record.attempts_total = s.attempts_total;
  record.restarts_by_reason = s.restarts_by_reason;
  record.last_exit = s.last_exit;
  record.pid = s.pid;
  const auto unix_ms = [](const std::optional<WallTime>& t) { return t ? ToUnixMillis(*t) : 0; };
  record.attempt_started_unix_ms = unix_ms(s.attempt_started);
  record.backoff_until_unix_ms = unix_ms(s.backoff_until);
  record.stop_rung = s.stop_rung;
  record.stop_next_rung_unix_ms = unix_ms(s.stop_next_rung);
  record.stop_intent = s.stop_intent;
  record.reset_pending = s.reset_pending ? FailureClassName(*s.reset_pending) : "";
  record.log_dropped_bytes = static_cast<std::int64_t>(s.log_dropped_bytes);
  record.gang_generation = s.gang_generation;
  record.gang_failed_generation = s.gang_failed_generation;
  return record;
}

JobMemory ToJobMemory(const JobRecord& record, std::deque<Incident> incidents) {
  const auto wall = [](std::int64_t unix_ms) -> std::optional<WallTime> {
    if (unix_ms <= 0) return std::nullopt;
    return WallTime(std::chrono::milliseconds(unix_ms));
  };
  JobMemory memory;
  memory.state = ParseJobState(record.state).value_or(JobState::kStopped);
  memory.reason = record.state_reason;
  memory.state_since = WallTime(std::chrono::milliseconds(record.state_since_unix_ms));
  memory.attempt = record.attempt;
  memory.restarts = record.restarts;
  memory.attempts_total = record.attempts_total;
  memory.restarts_by_reason = record.restarts_by_reason;
  memory.last_exit = record.last_exit;
  memory.incidents = std::move(incidents);
  memory.attempt_started = wall(record.attempt_started_unix_ms);
  memory.backoff_until = wall(record.backoff_until_unix_ms);
  memory.stop_rung = record.stop_rung;
  memory.stop_next_rung = wall(record.stop_next_rung_unix_ms);
  memory.stop_intent = record.stop_intent;
  if (!record.reset_pending.empty()) memory.reset_pending = ParseFailureClass(record.reset_pending);
  memory.log_dropped_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, record.log_dropped_bytes));
  memory.gang_generation = record.gang_generation;
  memory.gang_failed_generation = record.gang_failed_generation;
  return memory;
}

EventRecord ToEventRecord(const JobEvent& event) {
  EventRecord record;
  record.job = event.job;
  record.time_unix_ms = ToUnixMillis(event.time);
  record.from_state = JobStateName(event.from);
  record.to_state = JobStateName(event.to);
  record.reason = event.reason;
  record.attempt = event.attempt;
  record.exit = event.exit;
  if (event.checkpoint) {
    record.checkpoint_path = event.checkpoint->path.string();
    record.checkpoint_step = event.checkpoint->step;
  }
  return record;
}

JobEvent FromEventRecord(const EventRecord& record) {
  JobEvent event;
  event.time = WallTime(std::chrono::milliseconds(record.time_unix_ms));
  event.job = record.job;
  event.from = ParseJobState(record.from_state).value_or(JobState::kStopped);
  event.to = ParseJobState(record.to_state).value_or(JobState::kStopped);
  event.reason = record.reason;
  event.attempt = record.attempt;
  event.exit = record.exit;
  if (!record.checkpoint_path.empty()) event.checkpoint = CheckpointRef{record.checkpoint_path, record.checkpoint_step};
  return event;
}

IncidentRecord ToIncidentRecord(const Incident& incident, std::int64_t id) {
  IncidentRecord record;
  record.id = id;
  record.job = incident.job;
  record.attempt = incident.attempt;
  record.started_unix_ms = ToUnixMillis(incident.started);
  if (!incident.open && incident.downtime) {
    record.ended_unix_ms =
        record.started_unix_ms + static_cast<std::int64_t>(incident.downtime->count() * 1000);
    if (record.ended_unix_ms == 0) record.ended_unix_ms = 1;  // 0 means open.
  }
  record.failure_class = FailureClassName(incident.failure.failure_class);
  record.action = RecoveryActionName(incident.failure.action);
  record.hint = incident.failure.hint;
  record.matched_line = incident.failure.matched_line;
  record.exit_description = incident.exit.Describe();
  record.step_reached = incident.step_reached.value_or(-1);
  record.checkpoint_step = incident.checkpoint_step.value_or(-1);
  record.notes = incident.outcome;
  record.reset_backend = incident.reset_backend;
  record.reset_duration_ms = incident.reset_duration
                                 ? static_cast<std::int64_t>(incident.reset_duration->count() * 1000)
                                 : 0;
  record.reset_result = incident.reset_result;
  return record;
}

Incident FromIncidentRecord(const IncidentRecord& record, std::int64_t local_id) {
  Incident incident;
  incident.id = local_id;
  incident.job = record.job;
  incident.attempt = record.attempt;
  incident.started = WallTime(std::chrono::milliseconds(record.started_unix_ms));
  incident.failure.failure_class = ParseFailureClass(record.failure_class).value_or(FailureClass::kUnknown);
  incident.failure.action = ParseRecoveryAction(record.action).value_or(RecoveryAction::kRestart);
  incident.failure.hint = record.hint;
  incident.failure.matched_line = record.matched_line;
  incident.exit.spawn_error.clear();
  incident.counted = incident.failure.failure_class != FailureClass::kPreemption;
  if (record.step_reached >= 0) incident.step_reached = record.step_reached;
  if (record.checkpoint_step >= 0) incident.checkpoint_step = record.checkpoint_step;
  incident.open = record.is_open();
  if (!incident.open) {
    incident.downtime = Seconds((record.ended_unix_ms - record.started_unix_ms) / 1000.0);
  }
  incident.outcome = record.notes;
  incident.reset_backend = record.reset_backend;
  if (record.reset_duration_ms > 0) incident.reset_duration = Seconds(record.reset_duration_ms / 1000.0);
  incident.reset_result = record.reset_result;
  incident.store_id = record.id;
  return incident;
}

}  // namespace tpud
