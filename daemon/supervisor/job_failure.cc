// What a Job does when an attempt fails or hangs: classify it, open an
// incident, and decide between restart (counted or not), waiting out a
// maintenance event, and giving up.
#include <re2/re2.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/supervisor/backoff.h"
#include "daemon/supervisor/job.h"
#include "daemon/core/durations.h"

namespace tpud {


namespace {

constexpr std::size_t kIncidentsKept = 100;

std::string Summary(const Classification& failure, const ExitStatus& status) {
  return absl::StrCat(FailureClassName(failure.failure_class), ": ", status.Describe());
}

}  // namespace

void Job::BeginAttemptWatch() {
  scanner_.emplace(classifier_);
  absl::StatusOr<ProgressTracker> tracker = ProgressTracker::Create(spec_.progress, attempt_started_);
  progress_.reset();
  if (tracker.ok()) progress_.emplace(std::move(*tracker));
  if (spec_.progress.configured && !spec_.progress.heartbeat_file.empty() && deps_.watch_file) {
    heartbeat_watch_ = deps_.watch_file(spec_.progress.heartbeat_file, [this] {
      if (!progress_) return;
      progress_->OnHeartbeat(deps_.clock->Now());
      goodput_.OnProgress(deps_.clock->Now(), progress_->last_step());
      OnProgressEvent(true);
    });
  }
  ArmHangTimer();
}

void Job::EndAttemptWatch() {
  if (hang_timer_ != 0) deps_.clock->Cancel(hang_timer_);
  hang_timer_ = 0;
  hang_deadline_.reset();
  heartbeat_watch_.reset();
}

// The hot path for output: a block of lines costs one pass of the rule set
// and one of the progress regex, unless something in it matches.
void Job::OnOutputLines(std::string_view lines) {
  const SteadyTime now = deps_.clock->Now();
  if (scanner_) scanner_->ScanLines(lines);
  const bool counted = progress_ && progress_->OnOutputLines(lines, now);
  AccountOutput(lines, counted, now);
  OnProgressEvent(counted);
  deps_.listener->OnJobOutputLines(spec_.name, lines);
}

// Single lines are rare (a last line without '\n', test fakes): a block of one.
void Job::OnOutputLine(std::string_view line) {
  std::string block(line);
  block.push_back('\n');
  OnOutputLines(block);
}

void Job::AccountOutput(std::string_view lines, bool counted, SteadyTime now) {
  if (restore_re_ && !goodput_.progressed() &&
      RE2::PartialMatch(re2::StringPiece(lines.data(), lines.size()), *restore_re_)) {
    goodput_.OnRestoreBegin(now);
  }
  if (counted) {
    goodput_.OnProgress(now, progress_->last_step());
  } else if (!spec_.progress.configured && state_ == JobState::kRunning) {
    goodput_.OnProgress(now, std::nullopt);  // No progress section: output while up counts.
  }
}

// The hang timer fires at the deadline it was armed for and re-arms if
// progress moved the deadline later; only a deadline that moved *earlier*
// (first progress after a long startup grace, a tighter learned timeout)
// needs re-arming here. So a progress line costs no timer operation.
void Job::OnProgressEvent(bool counted) {
  if (!counted || !progress_) return;
  const std::optional<SteadyTime> deadline = progress_->Deadline();
  if (deadline && (!hang_deadline_ || *deadline < *hang_deadline_)) ArmHangTimer();
}

void Job::ArmHangTimer() {
  if (hang_timer_ != 0) deps_.clock->Cancel(hang_timer_);
  hang_timer_ = 0;
  hang_deadline_ = progress_ ? progress_->Deadline() : std::nullopt;
  if (!hang_deadline_) return;
  hang_timer_ = deps_.clock->RunAfter(*hang_deadline_ - deps_.clock->Now(), [this] {
    hang_timer_ = 0;
    OnHangTimer();
  });
}

void Job::OnHangTimer() {
  if (attempt_ == nullptr || (state_ != JobState::kStarting && state_ != JobState::kRunning)) return;
  const SteadyTime now = deps_.clock->Now();
  const std::optional<SteadyTime> deadline = progress_->Deadline();
  if (!deadline) return;
  if (*deadline > now) {
    ArmHangTimer();
    return;
  }
  hung_ = true;
  const SteadyTime since = progress_->last_progress().value_or(attempt_started_);
  const std::string what = progress_->last_progress() ? "no progress" : "no progress since start";
  TransitionTo(JobState::kStopping,
               absl::StrCat("hang: ", what, " for ", FormatSeconds(now - since), " (timeout ",
                            FormatSeconds(progress_->last_progress()
                                              ? progress_->effective_timeout()
                                              : Seconds(*deadline - attempt_started_)),
                            "); stopping the attempt to restart it"));
  SendStopRung(0);
}

Classification Job::ClassifyFailure(const ExitStatus& status) const {
  Classification failure = scanner_ ? scanner_->Classify(status, hung_) : Classification{};
  if (maintenance_notice_) {
    failure.failure_class = FailureClass::kPreemption;
    failure.action = RecoveryAction::kWaitAndRestart;
    failure.rule = absl::StrCat("metadata:", maintenance_what_);
    failure.matched_line.clear();
    failure.hint = "the VM got a maintenance event or preemption notice; tpud sent the checkpoint "
                   "signal and restarts the job when the event is over";
  }
  return failure;
}

void Job::OnAttemptFailed(const ExitStatus& status) {
  EndAttemptWatch();
  last_exit_ = status;
  const Classification failure = ClassifyFailure(status);
  ++failures_by_class_[FailureClassName(failure.failure_class)];
  const Seconds uptime = deps_.clock->Now() - attempt_started_;
  if (uptime.count() >= spec_.restart.reset_after_seconds) restarts_ = 0;  // Healthy long enough.
  Incident& incident = OpenIncident(status, failure);
  if (failure.action == RecoveryAction::kFail) {
    return GiveUp(status, absl::StrCat(Summary(failure, status), " is not fixed by restarting",
                                       failure.hint.empty() ? "" : ": ", failure.hint));
  }
  if (RepeatsLastFailure(incident)) {
    return GiveUp(status, absl::StrCat(Summary(failure, status), " again at step ", *incident.step_reached,
                                       ": the same failure at the same step twice in a row is "
                                       "deterministic; not retrying"));
  }
  if (failure.action == RecoveryAction::kWaitAndRestart) {
    incident.counted = false;  // Preemption is not the job's fault (Kubernetes' Ignore).
    if (deps_.maintenance_active && deps_.maintenance_active()) return WaitForMaintenance(status);
    return ScheduleRestart(status, incident);
  }
  if (restarts_ >= spec_.restart.max_restarts) {
    return GiveUp(status, absl::StrCat("gave up after ", restarts_, " restart", restarts_ == 1 ? "" : "s",
                                       " (max_restarts ", spec_.restart.max_restarts, "): ",
                                       Summary(failure, status)));
  }
  if (failure.action == RecoveryAction::kResetAndRestart && deps_.reset_tpu) {
    return ResetThenRestart(status, incident);
  }
  ScheduleRestart(status, incident);
}

// BACKOFF while the TPU is reset off the loop (minutes, for a node stop and
// start); the restart follows whatever the reset's outcome, which the
// incident records.
void Job::ResetThenRestart(const ExitStatus& status, const Incident& incident) {
  incidents_.back().outcome = "resetting the TPU";
  PublishIncident();
  reset_pending_ = incident.failure.failure_class;  // Persisted with the transition: redone after a restart.
  TransitionTo(JobState::kBackoff, absl::StrCat(Summary(incident.failure, status), "; resetting the TPU"),
               status);
  RunTpuReset(status, incident.failure.failure_class);
}

// In BACKOFF with the open incident last: resets, then schedules the restart.
void Job::RunTpuReset(const ExitStatus& status, FailureClass failure_class) {
  TpuResetRequest request;
  request.job = spec_.name;
  request.failure_class = failure_class;
  reset_pending_ = failure_class;
  const std::uint64_t generation = ++reset_generation_;
  deps_.reset_tpu(request, [this, generation, status](TpuResetResult result) {
    if (generation != reset_generation_ || state_ != JobState::kBackoff || timer_ != 0) return;
    reset_pending_.reset();
    if (!incidents_.empty() && incidents_.back().open && result.attempted) {
      incidents_.back().reset_backend = result.backend;
      incidents_.back().reset_duration = result.duration;
      incidents_.back().reset_result = result.status.ok() ? "ok" : std::string(result.status.message());
    }
    ScheduleRestart(status, incidents_.back());
    deps_.listener->OnJobUpdated(spec_.name);
  });
}

bool Job::RepeatsLastFailure(const Incident& incident) const {
  if (incidents_.size() < 2 || incident.failure.failure_class == FailureClass::kPreemption) return false;
  const Incident& previous = incidents_[incidents_.size() - 2];
  return previous.attempt == incident.attempt - 1 &&
         previous.failure.failure_class == incident.failure.failure_class &&
         previous.failure.rule == incident.failure.rule && previous.step_reached &&
         incident.step_reached && *previous.step_reached == *incident.step_reached;
}

void Job::ScheduleRestart(const ExitStatus& status, const Incident& incident) {
  const std::string cause = FailureClassName(incident.failure.failure_class);
  std::string budget = "not counted against max_restarts";
  if (incident.counted) {
    ++restarts_;
    ++restarts_by_reason_[cause];
    budget = absl::StrCat("restart ", restarts_, "/", spec_.restart.max_restarts);
  }
  if (incident.failure.action == RecoveryAction::kResetAndRestart) {
    if (!deps_.reset_tpu) {
      budget += "; no TPU reset backend configured, restarting without a reset";
    } else if (!incident.reset_result.empty()) {
      budget += absl::StrCat("; TPU reset (", incident.reset_backend, ") ",
                             incident.reset_result == "ok" ? "done" : "failed: " + incident.reset_result);
    }
  }
  const Seconds delay = BackoffDelay(spec_.restart, std::max(restarts_, 1), deps_.random());
  backoff_until_ = deps_.clock->Now() + ToNanos(delay);
  const std::string what = absl::StrCat(Summary(incident.failure, status), "; ", budget);
  incidents_.back().outcome = absl::StrCat("restarting in ", FormatSeconds(delay));
  PublishIncident();
  if (state_ == JobState::kBackoff) {
    reason_ = absl::StrCat(what, " in ", FormatSeconds(delay));  // After a reset: same state, new plan.
  } else {
    TransitionTo(JobState::kBackoff, absl::StrCat(what, " in ", FormatSeconds(delay)), status);
  }
  timer_ = deps_.clock->RunAfter(ToNanos(delay), [this, what] {
    timer_ = 0;
    if (deps_.maintenance_active && deps_.maintenance_active()) return;  // OnMaintenanceOver resumes.
    LaunchAttempt(what);
  });
}

void Job::WaitForMaintenance(const ExitStatus& status) {
  incidents_.back().outcome = "waiting for the maintenance event to end";
  PublishIncident();
  TransitionTo(JobState::kBackoff,
               absl::StrCat("preemption: ", status.Describe(),
                            "; waiting for the maintenance event to end (not counted against max_restarts)"),
               status);
}

void Job::GiveUp(const ExitStatus& status, const std::string& why) {
  CloseIncident(absl::StrCat("gave up: ", why));
  TransitionTo(JobState::kFailed, why, status);
}

void Job::OnMaintenanceNotice(const std::string& what) {
  if (attempt_ == nullptr || maintenance_notice_) return;
  if (state_ != JobState::kStarting && state_ != JobState::kRunning) return;
  maintenance_notice_ = true;
  maintenance_what_ = what;
  SPDLOG_INFO("job {}: {}: sending {} so it can checkpoint", spec_.name, what,
              SignalName(spec_.checkpoint_signal));
  if (absl::Status s = attempt_->SignalGroup(spec_.checkpoint_signal); !s.ok()) {
    SPDLOG_WARN("job {}: {}", spec_.name, std::string(s.message()));
  }
}

void Job::OnMaintenanceOver() {
  if (state_ == JobState::kBackoff && timer_ == 0) LaunchAttempt("the maintenance event is over");
}

Incident& Job::OpenIncident(const ExitStatus& status, const Classification& failure) {
  CloseIncident("failed again before the next attempt was up");
  Incident incident;
  incident.id = incidents_.empty() ? 1 : incidents_.back().id + 1;
  incident.job = spec_.name;
  incident.attempt = attempt_number_;
  incident.started = deps_.clock->WallNow();
  incident.failure = failure;
  incident.exit = status;
  if (progress_) incident.step_reached = progress_->last_step();
  incident_started_ = deps_.clock->Now();
  incidents_.push_back(std::move(incident));
  while (incidents_.size() > kIncidentsKept) incidents_.pop_front();
  return incidents_.back();
}

void Job::CloseIncident(const std::string& outcome) {
  if (incidents_.empty() || !incidents_.back().open) return;
  Incident& incident = incidents_.back();
  incident.open = false;
  incident.outcome = outcome;
  incident.downtime = deps_.clock->Now() - incident_started_;
  PublishIncident();
}

void Job::PublishIncident() {
  if (!incidents_.empty()) deps_.listener->OnIncident(incidents_.back());
}

}  // namespace tpud
