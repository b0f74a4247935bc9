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
  return record;
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
