#include "daemon/rpc/convert.h"

namespace tpud {

v1::JobState ToProto(JobState state) {
  switch (state) {
    case JobState::kStopped: return v1::JOB_STATE_STOPPED;
    case JobState::kStarting: return v1::JOB_STATE_STARTING;
    case JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case JobState::kBackoff: return v1::JOB_STATE_BACKOFF;
    case JobState::kStopping: return v1::JOB_STATE_STOPPING;
    case JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed: return v1::JOB_STATE_FAILED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

void ToProto(const ExitStatus& status, v1::ExitInfo* out) {
  out->set_exited(true);
  out->set_code(status.code);
  out->set_signal(status.signal);
  if (status.signal != 0) out->set_signal_name(SignalName(status.signal));
  out->set_description(status.Describe());
}

void ToProto(const std::optional<CheckpointRef>& checkpoint, v1::Checkpoint* out) {
  out->set_found(checkpoint.has_value());
  out->set_path(checkpoint ? checkpoint->path.string() : "");
  out->set_step(checkpoint ? checkpoint->step : -1);
}

void ToProto(const JobSnapshot& s, v1::JobStatus* out) {
  out->set_name(s.name);
  out->set_state(ToProto(s.state));
  out->set_pid(s.pid);
  out->set_attempt(s.attempt);
  out->set_restarts(s.restarts);
  out->set_max_restarts(s.spec.restart.max_restarts);
  if (s.last_exit) ToProto(*s.last_exit, out->mutable_last_exit());
  ToProto(s.checkpoint, out->mutable_checkpoint());
  out->set_reason(s.reason);
  out->set_uptime_seconds(s.uptime.count());
  out->set_backoff_remaining_seconds(s.backoff_remaining.count());
  for (const std::string& arg : s.spec.command) out->add_command(arg);
  out->set_working_dir(s.spec.working_dir.string());
  out->set_origin(s.spec.origin);
  out->set_log_path(s.log_path.string());
  out->set_state_since_unix_ms(ToUnixMillis(s.state_since));
  if (s.last_incident) ToProto(*s.last_incident, out->mutable_last_incident());
  out->set_last_step(s.last_step.value_or(-1));
  for (const auto& [name, count] : s.failures_by_class) (*out->mutable_failures_by_class())[name] = count;
  if (const std::optional<double> ratio = s.goodput.ratio()) {
    v1::Goodput* goodput = out->mutable_goodput();
    goodput->set_ratio(*ratio);
    goodput->set_productive_seconds(s.goodput.productive.count());
    for (BadputCause cause : kAllBadputCauses) {
      (*goodput->mutable_badput_seconds())[std::string(BadputCauseName(cause))] = s.goodput.badput_of(cause).count();
    }
  }
  out->set_log_dropped_bytes(static_cast<std::int64_t>(s.log_dropped_bytes));
  out->set_log_dropping(s.log_dropping);
  out->set_user(s.spec.user);
  out->set_group(s.spec.group);
  if (s.state == JobState::kStopping) {
    v1::StopProgress* stop = out->mutable_stop();
    const std::vector<int>& signals = s.spec.stop.signals;
    stop->set_intent(s.stop_intent);
    stop->set_rungs(static_cast<int>(signals.size()));
    if (s.stop_rung >= 0 && static_cast<std::size_t>(s.stop_rung) < signals.size()) {
      stop->set_rung(s.stop_rung + 1);
      stop->set_signal(SignalName(signals[s.stop_rung]));
    }
    const std::size_t next = static_cast<std::size_t>(s.stop_rung + 1);
    if (s.stop_next_rung && next < signals.size()) {
      stop->set_next_signal(SignalName(signals[next]));
      stop->set_next_in_seconds(s.stop_next_rung_in.count());
    }
  }
}

void ToProto(const JobEvent& e, v1::JobEvent* out) {
  out->set_sequence(e.sequence);
  out->set_time_unix_ms(ToUnixMillis(e.time));
  out->set_job(e.job);
  out->set_from(ToProto(e.from));
  out->set_to(ToProto(e.to));
  out->set_reason(e.reason);
  out->set_attempt(e.attempt);
  if (e.exit) ToProto(*e.exit, out->mutable_exit());
  if (e.to == JobState::kStarting) ToProto(e.checkpoint, out->mutable_checkpoint());
}

void ToProto(const Classification& failure, v1::Failure* out) {
  out->set_failure_class(FailureClassName(failure.failure_class));
  out->set_action(RecoveryActionName(failure.action));
  out->set_hint(failure.hint);
  out->set_matched_line(failure.matched_line);
  out->set_rule(failure.rule);
}

void ToProto(const Incident& incident, v1::Incident* out) {
  out->set_id(incident.id);
  out->set_job(incident.job);
  out->set_attempt(incident.attempt);
  out->set_time_unix_ms(ToUnixMillis(incident.started));
  ToProto(incident.failure, out->mutable_failure());
  ToProto(incident.exit, out->mutable_exit());
  out->set_counted(incident.counted);
  out->set_step_reached(incident.step_reached.value_or(-1));
  out->set_checkpoint_step(incident.checkpoint_step.value_or(-1));
  out->set_steps_lost(incident.steps_lost().value_or(-1));
  out->set_downtime_seconds(incident.downtime ? incident.downtime->count() : 0);
  out->set_open(incident.open);
  out->set_outcome(incident.outcome);
  out->set_reset_backend(incident.reset_backend);
  out->set_reset_duration_seconds(incident.reset_duration ? incident.reset_duration->count() : 0);
  out->set_reset_result(incident.reset_result);
}

void ToProto(const NumberedEvent& event, v1::WatchEventsResponse* out) {
  if (const auto* transition = std::get_if<JobEvent>(&event.event)) {
    ToProto(*transition, out->mutable_event());
    out->mutable_event()->set_sequence(event.sequence);
  } else {
    ToProto(std::get<Incident>(event.event), out->mutable_incident());
  }
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace tpud
