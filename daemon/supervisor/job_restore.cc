// Carrying a job on across a tpud restart or a VM reboot.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/supervisor/job.h"
#include "daemon/core/durations.h"

namespace tpud {


bool Job::wants_running() const {
  switch (state_) {
    case JobState::kStarting:
    case JobState::kRunning:
    case JobState::kBackoff:
      return true;
    case JobState::kStopping:
      return hung_ || start_after_stop_;
    default:
      return false;
  }
}

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
  state_ = memory.state;
  reason_ = std::move(memory.reason);
  state_since_ = memory.state_since;
  attempt_number_ = memory.attempt;
  restarts_ = memory.restarts;
  attempts_total_ = memory.attempts_total;
  restarts_by_reason_ = std::move(memory.restarts_by_reason);
  last_exit_ = std::move(memory.last_exit);
  incidents_ = std::move(memory.incidents);
  if (!incidents_.empty() && incidents_.back().open) {
    // Its downtime keeps counting from when it began, outage included.
    incident_started_ = to_steady(incidents_.back().started);
  }
  attempt_started_ = to_steady(memory.attempt_started.value_or(memory.state_since));
  if (memory.backoff_until) backoff_until_ = to_steady(*memory.backoff_until);
  restored_backoff_timer_ = memory.backoff_until.has_value();
  stop_rung_ = memory.stop_rung;
  if (memory.stop_next_rung) stop_next_rung_ = to_steady(*memory.stop_next_rung);
  hung_ = memory.stop_intent == "hang";
  start_after_stop_ = memory.stop_intent == "restart";
  reset_pending_ = memory.reset_pending;
  log_dropped_before_ = memory.log_dropped_bytes;
}

void Job::Resume(std::unique_ptr<Attempt> adopted, int adopted_attempt) {
  if (adopted) {
    attempt_ = std::move(adopted);
    attempt_number_ = std::max(attempt_number_, adopted_attempt);
    return ResumeAdopted();
  }
  switch (state_) {
    case JobState::kStarting:
    case JobState::kRunning:
    case JobState::kStopping: {
      if (state_ == JobState::kStopping && !wants_running()) {
        TransitionTo(JobState::kStopped, "its attempt ended while tpud was down");
        return;
      }
      ExitStatus lost;
      lost.spawn_error = "the attempt was gone when tpud started (VM reboot or crash)";
      attempt_started_ = deps_.clock->Now();
      if (!scanner_) scanner_.emplace(classifier_);
      // Not the job's fault: classified as a preemption, so not counted.
      maintenance_notice_ = true;
      maintenance_what_ = "attempt lost while tpud was down";
      OnAttemptFailed(lost);
      return;
    }
    case JobState::kBackoff:
      return ResumeBackoff();
    default:
      return;
  }
}

// The attempt runs on under its shim: starting keeps what is left of
// start_seconds, stopping walks on from the rung it had reached.
void Job::ResumeAdopted() {
  if (state_ != JobState::kStarting && state_ != JobState::kStopping) state_ = JobState::kRunning;
  // Goodput counts from here: the attempt was up and (most likely) training.
  goodput_.OnAttemptStart(deps_.clock->Now(), std::nullopt);
  goodput_.OnProgress(deps_.clock->Now(), std::nullopt);
  BeginAttemptWatch();
  SPDLOG_INFO("job {}: re-attached to attempt {} (pid {})", spec_.name, attempt_number_, attempt_->pid());
  const SteadyTime now = deps_.clock->Now();
  if (state_ == JobState::kStarting) {
    const Seconds left = Seconds(spec_.start_seconds) - (now - attempt_started_);
    timer_ = deps_.clock->RunAfter(ToNanos(std::max(left, Seconds(0))), [this] {
      timer_ = 0;
      OnRunning();
    });
    return;
  }
  if (state_ != JobState::kStopping) return;
  if (stop_rung_ < 0) return SendStopRung(0);
  const std::size_t next = static_cast<std::size_t>(stop_rung_) + 1;
  if (next >= spec_.stop.signals.size()) return;  // The last signal went out: wait for the exit.
  const SteadyTime due = stop_next_rung_.value_or(now);
  stop_next_rung_ = due;
  timer_ = deps_.clock->RunAfter(std::max(due - now, SteadyTime::duration(0)), [this, next] {
    timer_ = 0;
    SendStopRung(next);
  });
}

void Job::ResumeBackoff() {
  const bool incident_open = !incidents_.empty() && incidents_.back().open;
  if (reset_pending_ && deps_.reset_tpu && incident_open) {
    SPDLOG_INFO("job {}: the TPU reset due before tpud restarted is redone", spec_.name);
    reason_ = absl::StrCat(reason_, " (reset redone after a tpud restart)");
    return RunTpuReset(last_exit_.value_or(ExitStatus{}), *reset_pending_);
  }
  if (!restored_backoff_timer_) {
    // No timer was running: a maintenance wait (or a reset without backend now).
    if (deps_.maintenance_active && deps_.maintenance_active()) return;
    return LaunchAttempt("resuming after a tpud restart");
  }
  const Seconds left = std::max(Seconds(0), Seconds(backoff_until_ - deps_.clock->Now()));
  SPDLOG_INFO("job {}: backoff resumes with {} left", spec_.name, FormatSeconds(left));
  timer_ = deps_.clock->RunAfter(ToNanos(left), [this] {
    timer_ = 0;
    if (deps_.maintenance_active && deps_.maintenance_active()) return;  // OnMaintenanceOver resumes.
    LaunchAttempt("resuming after a tpud restart");
  });
}

}  // namespace tpud
