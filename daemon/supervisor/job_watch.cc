// Watching the current attempt: its output (failure lines, progress,
// goodput), the hang deadline, how its failure is classified, and the
// incidents its failures open.
#include <re2/re2.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/core/durations.h"
#include "daemon/process/process_tree.h"
#include "daemon/supervisor/job.h"

namespace tpud {

namespace {

constexpr std::size_t kIncidentsKept = 100;

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
  if (hang_capture_reason_) {
    // The attempt ended while its hang was captured: its exit decides, and
    // gets its own bundle (the hang's, when written, is kept beside it).
    hang_capture_reason_.reset();
    hang_bundle_number_ = 0;
  }
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
  } else if (!spec_.progress.configured && machine_.state == JobState::kRunning) {
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
  if (hang_capture_reason_) return;  // The hang is declared; its timer waits for the bundle.
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
  if (attempt_ == nullptr || !progress_) return;
  const SteadyTime now = deps_.clock->Now();
  const std::optional<SteadyTime> deadline = progress_->Deadline();
  if (!deadline) return;
  if (*deadline > now) {
    ArmHangTimer();
    return;
  }
  const SteadyTime since = progress_->last_progress().value_or(attempt_started_);
  const std::string what = progress_->last_progress() ? "no progress" : "no progress since start";
  std::string reason = absl::StrCat(
      "hang: ", what, " for ", FormatSeconds(now - since), " (timeout ",
      FormatSeconds(progress_->last_progress() ? progress_->effective_timeout()
                                               : Seconds(*deadline - attempt_started_)),
      "); stopping the attempt to restart it");
  if (deps_.capture_incident && machine_.state == JobState::kRunning) {
    CaptureHang(std::move(reason));
  } else {
    Deliver(machine::HangDetected{std::move(reason)});
  }
}

// Once the ladder's first signal is sent the evidence starts to go, so the
// stacks are taken first; the hang reaches the machine when the bundle is
// written, or after capture_seconds if the capture is stuck (the worker
// stops eu-stack at the same bound): a capture never holds the ladder longer.
void Job::CaptureHang(std::string reason) {
  const std::int64_t number = incidents_.empty() ? 1 : incidents_.back().id + 1;
  incident::CaptureRequest request =
      BundleRequest("hang", reason, ClassifyFailure(ExitStatus{}, /*hung=*/true), number);
  request.pid = attempt_->pid();
  if (const std::optional<ProcessIdentity> who = IdentifyProcess(request.pid)) {
    request.pid_start_ticks = who->start_ticks;
  }
  SPDLOG_INFO("job {}: {}; capturing incident bundle {} first", spec_.name, reason, number);
  hang_capture_reason_ = std::move(reason);
  hang_bundle_number_ = number;
  hang_bundle_attempt_ = machine_.attempt;
  const int attempt = machine_.attempt;
  hang_timer_ = deps_.clock->RunAfter(ToNanos(deps_.capture_seconds), [this, attempt] {
    hang_timer_ = 0;
    SPDLOG_WARN("job {}: incident bundle not written within capture_seconds; stopping the attempt anyway",
                spec_.name);
    FinishHangCapture(attempt);
  });
  std::weak_ptr<char> alive = alive_;
  deps_.capture_incident(std::move(request), [this, alive, attempt] {
    if (alive.lock()) FinishHangCapture(attempt);
  });
}

void Job::FinishHangCapture(int attempt) {
  if (!hang_capture_reason_ || attempt != machine_.attempt || attempt_ == nullptr) return;
  std::string reason = *std::exchange(hang_capture_reason_, std::nullopt);
  if (hang_timer_ != 0) deps_.clock->Cancel(hang_timer_);
  hang_timer_ = 0;
  Deliver(machine::HangDetected{std::move(reason)});
}

incident::CaptureRequest Job::BundleRequest(const std::string& trigger, const std::string& reason,
                                            const Classification& verdict, std::int64_t number) const {
  incident::CaptureRequest request;
  request.job = spec_.name;
  request.number = number;
  request.attempt = machine_.attempt;
  request.trigger = trigger;
  request.reason = reason;
  request.failure_class = FailureClassName(verdict.failure_class);
  request.action = RecoveryActionName(verdict.action);
  request.hint = verdict.hint;
  request.deciding_line = verdict.matched_line;
  request.rule = verdict.rule;
  request.log_path = deps_.log_dir / (spec_.name + ".log");
  request.env = attempt_env_;
  request.unredacted_env = spec_.unredacted_env;
  const absl::StatusOr<std::optional<RunAs>> who = JobUser();
  if (who.ok()) request.owner_uid = *who ? (*who)->uid : ::geteuid();  // Unknown: 0, root only.
  request.attempt_started_monotonic =
      std::chrono::duration_cast<std::chrono::microseconds>(attempt_started_.time_since_epoch());
  return request;
}

// The scanner's verdict; an attempt that got the checkpoint signal is a
// preemption, whatever it printed or how it exited.
Classification Job::ClassifyFailure(const ExitStatus& status, bool hung) const {
  if (machine_.notice_sent) return machine::NoticeClassification(machine_.notice_what);
  return scanner_ ? scanner_->Classify(status, hung) : AttemptScanner(classifier_).Classify(status, hung);
}

void Job::OpenIncident(const machine::OpenIncident& open) {
  CloseIncident("failed again before the next attempt was up");
  Incident incident;
  incident.id = incidents_.empty() ? 1 : incidents_.back().id + 1;
  incident.job = spec_.name;
  incident.attempt = machine_.attempt;
  incident.started = deps_.clock->WallNow();
  incident.failure = open.failure;
  incident.exit = open.exit;
  incident.step_reached = open.step;
  incident_started_ = deps_.clock->Now();
  incidents_.push_back(std::move(incident));
  while (incidents_.size() > kIncidentsKept) incidents_.pop_front();
  const Incident& opened = incidents_.back();
  // The exit's bundle, unless this attempt's hang bundle (with stacks)
  // already holds this incident, or nothing is wrong (a preemption) or
  // nothing ran. (A hang capture a person's stop overtook left a bundle for
  // a number no incident took: the next failure's bundle moves it aside.)
  const FailureClass cls = open.failure.failure_class;
  const bool hang_bundled = opened.id == hang_bundle_number_ && opened.attempt == hang_bundle_attempt_;
  if (deps_.capture_incident && !hang_bundled && cls != FailureClass::kPreemption &&
      open.failure.action != RecoveryAction::kWaitAndRestart && open.exit.spawn_error.empty()) {
    deps_.capture_incident(BundleRequest("exit", open.exit.Describe(), open.failure, opened.id), [] {});
  }
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
