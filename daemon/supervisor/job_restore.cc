// Carrying a job on across a tpud restart or a VM reboot.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/supervisor/job.h"
#include "daemon/core/durations.h"

namespace tpud {


void Job::Restore(JobState state, const std::string& reason, WallTime state_since, int attempt,
                  int restarts, std::int64_t attempts_total, std::map<std::string, std::int64_t> by_reason,
                  std::optional<ExitStatus> last_exit, std::deque<Incident> incidents) {
  JobMemory memory;
  memory.state = state;
  memory.reason = reason;
  memory.state_since = state_since;
  memory.attempt = attempt;
  memory.restarts = restarts;
  memory.attempts_total = attempts_total;
  memory.restarts_by_reason = std::move(by_reason);
  memory.last_exit = std::move(last_exit);
  memory.incidents = std::move(incidents);
  Restore(std::move(memory));
}

void Job::Restore(JobMemory memory) {
  const SteadyTime now = deps_.clock->Now();
  const WallTime wall_now = deps_.clock->WallNow();
  const auto to_steady = [&](WallTime t) {
    return now + std::chrono::duration_cast<SteadyTime::duration>(t - wall_now);
  };
  machine::State m;
  m.state = memory.state;
  m.reason = std::move(memory.reason);
  m.attempt = memory.attempt;
  m.restarts = memory.restarts;
  m.attempts_total = memory.attempts_total;
  m.restarts_by_reason = std::move(memory.restarts_by_reason);
  if (m.state == JobState::kStopping) {
    m.stop = memory.stop_intent == "hang"      ? machine::StopIntent::kHang
             : memory.stop_intent == "restart" ? machine::StopIntent::kRestart
             : memory.stop_intent == "gang"    ? machine::StopIntent::kGang
                                               : machine::StopIntent::kStop;
    m.stop_rung = memory.stop_rung;
  }
  state_since_ = memory.state_since;
  last_exit_ = std::move(memory.last_exit);
  incidents_ = std::move(memory.incidents);
  if (!incidents_.empty()) {
    const Incident& newest = incidents_.back();
    m.last_failure = machine::PastFailure{newest.attempt, newest.failure.failure_class, newest.failure.rule,
                                          newest.step_reached};
    if (newest.open) {
      // Its downtime keeps counting from when it began, outage included.
      incident_started_ = to_steady(newest.started);
    }
  }
  if (m.state == JobState::kBackoff && memory.reset_pending && !incidents_.empty() && incidents_.back().open) {
    // The restart that was to follow the reset (redone on Resume).
    m.reset_pending = memory.reset_pending;
    m.pending = machine::PendingRestart{last_exit_.value_or(ExitStatus{}), incidents_.back().failure,
                                        incidents_.back().counted};
  }
  m.generation = memory.gang_generation;
  m.failed_generation = memory.gang_failed_generation;
  machine_ = std::move(m);
  attempt_started_ = to_steady(memory.attempt_started.value_or(memory.state_since));
  restored_backoff_until_.reset();
  if (memory.backoff_until) restored_backoff_until_ = to_steady(*memory.backoff_until);
  restored_next_rung_.reset();
  if (memory.stop_next_rung) restored_next_rung_ = to_steady(*memory.stop_next_rung);
  log_dropped_before_ = memory.log_dropped_bytes;
}

void Job::Resume(std::unique_ptr<Attempt> adopted, int adopted_attempt) {
  const SteadyTime now = deps_.clock->Now();
  machine::Resumed resumed;
  resumed.maintenance_active = MaintenanceActive();
  resumed.jitter = deps_.random();
  if (adopted) {
    // The attempt runs on under its shim: starting keeps what is left of
    // start_seconds, stopping walks on from the rung it had reached.
    attempt_ = std::move(adopted);
    if (spec_.gang && deps_.gang != nullptr) {
      deps_.gang->AttemptChanged(spec_.name, std::max(machine_.attempt, adopted_attempt), attempt_->pid(),
                                 machine_.generation);
    }
    resumed.adopted = true;
    resumed.adopted_attempt = adopted_attempt;
    // Goodput counts from here: the attempt was up and (most likely) training.
    goodput_.OnAttemptStart(now, std::nullopt);
    goodput_.OnProgress(now, std::nullopt);
    BeginAttemptWatch();
    SPDLOG_INFO("job {}: re-attached to attempt {} (pid {})", spec_.name,
                std::max(machine_.attempt, adopted_attempt), attempt_->pid());
    resumed.start_left = Seconds(spec_.start_seconds) - (now - attempt_started_);
    resumed.rung_due_in = Seconds(restored_next_rung_.value_or(now) - now);
  } else {
    // No attempt survived (it ended while tpud was down): clear a record of
    // it a previous tpud could not, or another tpud would wait on it.
    if (spec_.gang && deps_.gang != nullptr) deps_.gang->AttemptChanged(spec_.name, machine_.attempt, 0, machine_.generation);
    if (restored_backoff_until_) {
      resumed.backoff_left = std::max(Seconds(0), Seconds(*restored_backoff_until_ - now));
    }
  }
  restored_backoff_until_.reset();
  restored_next_rung_.reset();
  Deliver(std::move(resumed));
}

}  // namespace tpud
