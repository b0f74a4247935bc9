// Carrying a job on across a tpud restart or a VM reboot.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/supervisor/job.h"

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
  state_ = state;
  reason_ = reason;
  state_since_ = state_since;
  attempt_number_ = attempt;
  restarts_ = restarts;
  attempts_total_ = attempts_total;
  restarts_by_reason_ = std::move(by_reason);
  last_exit_ = std::move(last_exit);
  incidents_ = std::move(incidents);
  if (!incidents_.empty() && incidents_.back().open) {
    // Its downtime keeps counting from when it began, outage included.
    incident_started_ = deps_.clock->Now() - (deps_.clock->WallNow() - incidents_.back().started);
  }
}

void Job::Resume(std::unique_ptr<Attempt> adopted, int adopted_attempt) {
  if (adopted) {
    attempt_ = std::move(adopted);
    attempt_number_ = std::max(attempt_number_, adopted_attempt);
    attempt_started_ = deps_.clock->Now() - (deps_.clock->WallNow() - state_since_);
    if (state_ != JobState::kStopping) state_ = JobState::kRunning;
    // Goodput counts from here: the attempt was up and (most likely) training.
    goodput_.OnAttemptStart(deps_.clock->Now(), std::nullopt);
    goodput_.OnProgress(deps_.clock->Now(), std::nullopt);
    BeginAttemptWatch();
    SPDLOG_INFO("job {}: re-attached to attempt {} (pid {})", spec_.name, attempt_number_, attempt_->pid());
    if (state_ == JobState::kStopping) SendStopRung(0);
    return;
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
      LaunchAttempt("resuming after a tpud restart");
      return;
    default:
      return;
  }
}

}  // namespace tpud
