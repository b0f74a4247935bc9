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
         pid == o.pid && attempt_dir == o.attempt_dir;
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
