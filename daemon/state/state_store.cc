// What both StateStore implementations share: record equality and checks.
#include "daemon/state/state_store.h"

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

bool SameExit(const std::optional<ExitStatus>& a, const std::optional<ExitStatus>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a.has_value()) return true;
  return a->code == b->code && a->signal == b->signal && a->core_dumped == b->core_dumped &&
         a->spawn_error == b->spawn_error;
}

}  // namespace

bool JobRecord::operator==(const JobRecord& o) const {
  return name == o.name && spec_yaml == o.spec_yaml && origin == o.origin &&
         desired_running == o.desired_running && state == o.state &&
         state_reason == o.state_reason && state_since_unix_ms == o.state_since_unix_ms &&
         attempt == o.attempt && restarts == o.restarts && attempts_total == o.attempts_total &&
         restarts_by_reason == o.restarts_by_reason && SameExit(last_exit, o.last_exit) &&
         pid == o.pid && attempt_dir == o.attempt_dir &&
         attempt_started_unix_ms == o.attempt_started_unix_ms &&
         backoff_until_unix_ms == o.backoff_until_unix_ms && stop_rung == o.stop_rung &&
         stop_next_rung_unix_ms == o.stop_next_rung_unix_ms && stop_intent == o.stop_intent &&
         reset_pending == o.reset_pending && log_dropped_bytes == o.log_dropped_bytes &&
         run_as_user == o.run_as_user && run_as_group == o.run_as_group &&
         gang_generation == o.gang_generation && gang_failed_generation == o.gang_failed_generation;
}

bool EventRecord::operator==(const EventRecord& o) const {
  return id == o.id && job == o.job && time_unix_ms == o.time_unix_ms && from_state == o.from_state &&
         to_state == o.to_state && reason == o.reason && attempt == o.attempt && SameExit(exit, o.exit) &&
         checkpoint_path == o.checkpoint_path && checkpoint_step == o.checkpoint_step;
}

absl::Status CheckEventRecord(const EventRecord& event) {
  if (event.job.empty()) return absl::InvalidArgumentError("event record: job: must not be empty");
  return absl::OkStatus();
}

absl::Status CheckJobRecord(const JobRecord& job) {
  if (job.name.empty()) return absl::InvalidArgumentError("job record: name: must not be empty");
  if (job.attempt < 0 || job.restarts < 0 || job.attempts_total < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job record \"", job.name,
                     "\": attempt, restarts and attempts_total must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckIncidentRecord(const IncidentRecord& incident) {
  if (incident.job.empty()) {
    return absl::InvalidArgumentError("incident record: job: must not be empty");
  }
  if (incident.started_unix_ms < 0 || incident.ended_unix_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "incident record of job \"", incident.job, "\": started/ended_unix_ms must be >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace tpud
