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

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace tpud
