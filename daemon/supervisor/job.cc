// Job lifecycle: start, stop, restart, attempts and their exits. Failure
// handling (classification, hangs, incidents, maintenance) is in job_failure.cc.
#include "daemon/supervisor/job.h"

#include <re2/re2.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/supervisor/backoff.h"
#include "daemon/core/durations.h"

namespace tpud {


std::vector<std::string> ExpandResumeArgs(const std::vector<std::string>& args,
                                          const CheckpointRef& checkpoint) {
  std::vector<std::string> out;
  out.reserve(args.size());
  for (const std::string& arg : args) {
    out.push_back(absl::StrReplaceAll(
        arg, {{"{checkpoint}", checkpoint.path.string()}, {"{step}", std::to_string(checkpoint.step)}}));
  }
  return out;
}

Job::Job(JobSpec spec, JobDeps deps) : deps_(std::move(deps)), state_since_(deps_.clock->WallNow()) {
  UpdateSpec(std::move(spec));
}

Job::~Job() {
  CancelTimer();
  EndAttemptWatch();
}

void Job::UpdateSpec(JobSpec spec) {
  // Specs are validated before they get here, so the rules compile; should
  // they not, the job still runs with the built-in rules alone.
  auto classifier = FailureClassifier::Shared(spec.failure_rules);
  if (!classifier.ok()) {
    SPDLOG_ERROR("job {}: failure_rules: {}", spec.name, std::string(classifier.status().message()));
    classifier = FailureClassifier::Shared({});
  }
  classifier_ = *classifier;
  restore_re_.reset();
  if (!spec.progress.restore_regex.empty()) {
    auto re = std::make_shared<const RE2>(absl::StrCat("(?m)", spec.progress.restore_regex), RE2::Quiet);
    if (re->ok()) restore_re_ = std::move(re);
  }
  spec_ = std::move(spec);
}

absl::Status Job::Start(const std::string& reason) {
  if (IsActive(state_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job \"", spec_.name, "\" is already ", JobStateName(state_)));
  }
  restarts_ = 0;
  preflight_failures_ = 0;
  start_after_stop_ = false;
  LaunchAttempt(reason);
  return absl::OkStatus();
}

absl::Status Job::Stop(const std::string& reason) {
  start_after_stop_ = false;
  switch (state_) {
    case JobState::kBackoff:
      CloseIncident("stopped");
      TransitionTo(JobState::kStopped, reason);
      break;
    case JobState::kStarting:
    case JobState::kRunning:
      TransitionTo(JobState::kStopping, reason);
      SendStopRung(0);
      break;
    case JobState::kStopping:
      hung_ = false;  // Stopping a hung attempt: the person's stop wins, no restart.
      break;
    default:
      break;  // Stopping an inactive job is a no-op, as with systemctl stop.
  }
  return absl::OkStatus();
}

absl::Status Job::Restart(const std::string& reason) {
  switch (state_) {
    case JobState::kStarting:
    case JobState::kRunning:
      TransitionTo(JobState::kStopping, reason);
      start_after_stop_ = true;
      SendStopRung(0);
      return absl::OkStatus();
    case JobState::kStopping:
      hung_ = false;  // The person's restart wins over tpud's own hang handling.
      start_after_stop_ = true;
      return absl::OkStatus();
    case JobState::kBackoff:
      restarts_ = 0;
      LaunchAttempt(reason);
      return absl::OkStatus();
    default:
      return Start(reason);
  }
}

void Job::LaunchAttempt(const std::string& reason) {
  if (deps_.preflight && !PreflightPasses(reason)) return;
  ++attempt_number_;
  ++attempts_total_;
  attempt_started_ = deps_.clock->Now();
  hung_ = false;
  maintenance_notice_ = false;
  absl::StatusOr<std::optional<CheckpointRef>> found = deps_.find_checkpoint(spec_.checkpoint);
  checkpoint_ = found.ok() ? *found : std::nullopt;
  if (!incidents_.empty() && incidents_.back().open && checkpoint_) {
    incidents_.back().checkpoint_step = checkpoint_->step;
    PublishIncident();
  }
  TransitionTo(JobState::kStarting, reason);
  if (!found.ok()) {
    ExitStatus status;
    status.spawn_error = absl::StrCat("checkpoint lookup: ", found.status().message());
    OnAttemptFailed(status);
    return;
  }
  LaunchSpec launch = BuildLaunchSpec();
  if (deps_.resolve_run_as) {
    absl::StatusOr<std::optional<RunAs>> run_as = deps_.resolve_run_as(spec_.user, spec_.group);
    if (!run_as.ok()) return OnLaunchFailed(run_as.status(), reason);
    launch.run_as = *run_as;
    if (launch.run_as && spec_.working_dir.empty()) {
      // Not tpud's state dir, which the user may not read: its home, or "/"
      // for a system user whose home does not exist (nobody's /nonexistent).
      std::error_code ec;
      launch.working_dir = std::filesystem::is_directory(launch.run_as->home, ec) ? launch.run_as->home : "/";
    }
  }
  absl::StatusOr<std::unique_ptr<Attempt>> launched = deps_.launcher->Launch(launch, this);
  if (!launched.ok()) return OnLaunchFailed(launched.status(), reason);
  launch_retries_ = 0;
  log_dropped_before_ += std::exchange(log_dropped_attempt_, 0);
  log_dropping_ = false;
  stop_rung_ = -1;
  stop_next_rung_.reset();
  attempt_ = std::move(*launched);
  goodput_.OnAttemptStart(attempt_started_, checkpoint_ ? std::optional<std::int64_t>(checkpoint_->step)
                                                        : std::nullopt);
  BeginAttemptWatch();
  timer_ = deps_.clock->RunAfter(ToNanos(spec_.start_seconds), [this] {
    timer_ = 0;
    OnRunning();
  });
}

void Job::OnLaunchFailed(const absl::Status& error, const std::string& reason) {
  const bool transient = error.code() == absl::StatusCode::kUnavailable ||
                         error.code() == absl::StatusCode::kResourceExhausted;
  if (transient) {
    // Out of processes, fds, memory or disk for a moment: not the job's
    // fault, and not permanent. Retry with the restart backoff, uncounted.
    ++launch_retries_;
    const Seconds delay = BackoffDelay(spec_.restart, launch_retries_, deps_.random());
    SPDLOG_WARN("job {}: launch failed: {}", spec_.name, std::string(error.message()));
    DelayLaunch(absl::StrCat("launch failed: ", error.message(), " (transient; retry ", launch_retries_, " in ",
                             FormatSeconds(delay), ", not counted against max_restarts)"));
    backoff_until_ = deps_.clock->Now() + ToNanos(delay);
    timer_ = deps_.clock->RunAfter(ToNanos(delay), [this, reason] {
      timer_ = 0;
      LaunchAttempt(reason);
    });
    deps_.listener->OnJobUpdated(spec_.name);
    return;
  }
  // A missing executable, working_dir or user does not fix itself: fail now.
  ExitStatus status;
  status.spawn_error = std::string(error.message());
  last_exit_ = status;
  CloseIncident(absl::StrCat("gave up: ", status.Describe()));
  TransitionTo(JobState::kFailed, status.Describe(), status);
}

// Runs the preflight checks; false when they failed and the launch waits in
// BACKOFF (for a TPU reset, or the backoff delay) before trying again.
bool Job::PreflightPasses(const std::string& reason) {
  const PreflightVerdict verdict = deps_.preflight(spec_);
  if (verdict.status.ok()) {
    preflight_failures_ = 0;
    return true;
  }
  ++preflight_failures_;
  const std::string why = absl::StrCat("preflight: ", verdict.status.message());
  if (verdict.reset_for && deps_.reset_tpu && preflight_failures_ == 1) {
    DelayLaunch(absl::StrCat(why, "; resetting the TPU"));
    const std::uint64_t generation = ++reset_generation_;
    deps_.reset_tpu(TpuResetRequest{spec_.name, *verdict.reset_for, {}},
                    [this, generation, reason](TpuResetResult) {
                      if (generation != reset_generation_ || state_ != JobState::kBackoff || timer_ != 0) return;
                      LaunchAttempt(reason);
                    });
    return false;
  }
  const Seconds delay = BackoffDelay(spec_.restart, preflight_failures_, deps_.random());
  DelayLaunch(absl::StrCat(why, "; checking again in ", FormatSeconds(delay)));
  backoff_until_ = deps_.clock->Now() + ToNanos(delay);
  timer_ = deps_.clock->RunAfter(ToNanos(delay), [this, reason] {
    timer_ = 0;
    LaunchAttempt(reason);
  });
  return false;
}

// BACKOFF with `why`: a transition from any other state; in BACKOFF already,
// the same state with a new reason and no timer.
void Job::DelayLaunch(std::string why) {
  if (state_ != JobState::kBackoff) return TransitionTo(JobState::kBackoff, std::move(why));
  CancelTimer();
  reason_ = std::move(why);
}

void Job::OnRunning() {
  // Without a progress section, being up counts as progress for goodput.
  if (!spec_.progress.configured) goodput_.OnProgress(deps_.clock->Now(), std::nullopt);
  TransitionTo(JobState::kRunning, absl::StrCat("up for ", FormatSeconds(Seconds(spec_.start_seconds))));
  CloseIncident("restarted");
}

void Job::OnExit(const ExitStatus& status) {
  attempt_.reset();
  goodput_.OnAttemptEnd(deps_.clock->Now(), hung_                                             ? AttemptEnd::kHung
                                            : status.succeeded() && !maintenance_notice_ ? AttemptEnd::kSucceeded
                                                                                          : AttemptEnd::kOther);
  last_exit_ = status;
  if (state_ == JobState::kStopping && !hung_) {
    EndAttemptWatch();
    CloseIncident("stopped");  // Stopped before it was up: the last failure's recovery ends here.
    TransitionTo(JobState::kStopped, absl::StrCat("stopped (", status.Describe(), ")"), status);
    if (start_after_stop_) {
      start_after_stop_ = false;
      restarts_ = 0;
      LaunchAttempt("restart requested");
    }
    return;
  }
  if (!IsActive(state_) || state_ == JobState::kBackoff) {
    SPDLOG_ERROR("job {}: exit in state {} ignored", spec_.name, JobStateName(state_));
    return;
  }
  if (status.succeeded() && !hung_ && !maintenance_notice_) {
    EndAttemptWatch();
    CloseIncident("restarted");  // Done before start_seconds: the restart still worked.
    TransitionTo(JobState::kSucceeded,
                 absl::StrCat("exited 0 after ", FormatSeconds(deps_.clock->Now() - attempt_started_)),
                 status);
    return;
  }
  OnAttemptFailed(status);
}

void Job::SendStopRung(std::size_t rung) {
  const std::vector<int>& signals = spec_.stop.signals;
  if (attempt_ == nullptr || rung >= signals.size()) return;
  if (absl::Status s = attempt_->SignalGroup(signals[rung]); !s.ok()) {
    SPDLOG_WARN("job {}: {}", spec_.name, std::string(s.message()));
  }
  stop_rung_ = static_cast<int>(rung);
  stop_next_rung_.reset();
  if (rung + 1 < signals.size()) {
    stop_next_rung_ = deps_.clock->Now() + ToNanos(spec_.stop.grace_seconds);
    timer_ = deps_.clock->RunAfter(ToNanos(spec_.stop.grace_seconds), [this, rung] {
      timer_ = 0;
      SendStopRung(rung + 1);
    });
  }
  deps_.listener->OnJobUpdated(spec_.name);
}

void Job::OnLogDropped(std::uint64_t dropped_bytes, bool dropping) {
  log_dropped_attempt_ = dropped_bytes;
  if (dropping == log_dropping_) return;
  log_dropping_ = dropping;
  const std::filesystem::path log = deps_.log_dir / (spec_.name + ".log");
  if (dropping) {
    SPDLOG_WARN("job {}: the log {} cannot be written (disk full?): output is being dropped ({} bytes so far)",
                spec_.name, log.string(), log_dropped_before_ + log_dropped_attempt_);
  } else {
    SPDLOG_WARN("job {}: the log {} is written again; {} bytes of output were lost", spec_.name, log.string(),
                log_dropped_before_ + log_dropped_attempt_);
  }
  deps_.listener->OnJobUpdated(spec_.name);
}

std::string Job::StopIntent() const {
  if (state_ != JobState::kStopping) return "";
  if (hung_) return "hang";
  return start_after_stop_ ? "restart" : "stop";
}

void Job::CancelTimer() {
  if (timer_ != 0) deps_.clock->Cancel(timer_);
  timer_ = 0;
}

void Job::TransitionTo(JobState next, std::string reason, std::optional<ExitStatus> exit) {
  if (!IsAllowedTransition(state_, next)) {
    SPDLOG_ERROR("job {}: refused transition {} -> {} ({})", spec_.name, JobStateName(state_),
                 JobStateName(next), reason);
    return;
  }
  CancelTimer();  // Each state owns at most one timer; it dies with the state.
  JobEvent event;
  event.time = deps_.clock->WallNow();
  event.job = spec_.name;
  event.from = state_;
  event.to = next;
  event.reason = reason;
  event.attempt = attempt_number_;
  event.exit = std::move(exit);
  if (next == JobState::kStarting) event.checkpoint = checkpoint_;
  if (!IsActive(next)) goodput_.OnIdle(deps_.clock->Now());
  if (next != JobState::kBackoff) reset_pending_.reset();  // A reset belongs to the backoff that asked.
  if (next != JobState::kStopping) {
    stop_rung_ = -1;
    stop_next_rung_.reset();
  }
  state_ = next;
  reason_ = std::move(reason);
  state_since_ = event.time;
  deps_.listener->OnJobEvent(event);
}

LaunchSpec Job::BuildLaunchSpec() const {
  LaunchSpec launch;
  launch.job = spec_.name;
  launch.attempt = attempt_number_;
  launch.argv = spec_.command;
  launch.env = spec_.env;
  launch.env["TPUD_JOB"] = spec_.name;
  launch.env["TPUD_ATTEMPT"] = std::to_string(attempt_number_);
  launch.env["TPUD_CHECKPOINT"] = checkpoint_ ? checkpoint_->path.string() : "";
  launch.env["TPUD_CHECKPOINT_STEP"] = checkpoint_ ? std::to_string(checkpoint_->step) : "";
  if (checkpoint_) {
    for (std::string& arg : ExpandResumeArgs(spec_.resume_args, *checkpoint_)) {
      launch.argv.push_back(std::move(arg));
    }
  }
  launch.working_dir = spec_.working_dir.empty() ? deps_.default_working_dir : spec_.working_dir;
  launch.log_path = deps_.log_dir / (spec_.name + ".log");
  launch.log_max_bytes = spec_.log.max_bytes;
  launch.log_backups = spec_.log.backups;
  return launch;
}

JobSnapshot Job::Snapshot() const {
  JobSnapshot s;
  s.name = spec_.name;
  s.state = state_;
  s.reason = reason_;
  s.state_since = state_since_;
  s.pid = attempt_ ? attempt_->pid() : 0;
  s.attempt = attempt_number_;
  s.restarts = restarts_;
  s.last_exit = last_exit_;
  s.checkpoint = checkpoint_;
  const SteadyTime now = deps_.clock->Now();
  if (attempt_) s.uptime = now - attempt_started_;
  if (state_ == JobState::kBackoff && timer_ != 0) {
    s.backoff_remaining = std::max(Seconds(0), Seconds(backoff_until_ - now));
  }
  s.attempts_total = attempts_total_;
  s.restarts_by_reason = restarts_by_reason_;
  s.failures_by_class = failures_by_class_;
  if (!incidents_.empty()) s.last_incident = incidents_.back();
  if (progress_) s.last_step = progress_->last_step();
  s.goodput = goodput_.Figures(now);
  s.log_path = deps_.log_dir / (spec_.name + ".log");
  s.spec = spec_;
  if (s.spec.working_dir.empty()) s.spec.working_dir = deps_.default_working_dir;
  s.log_dropped_bytes = log_dropped_before_ + log_dropped_attempt_;
  s.log_dropping = log_dropping_;
  const WallTime wall_now = deps_.clock->WallNow();
  const auto to_wall = [&](SteadyTime t) {
    return wall_now + std::chrono::duration_cast<WallTime::duration>(t - now);
  };
  if (attempt_) s.attempt_started = to_wall(attempt_started_);
  if (state_ == JobState::kBackoff && timer_ != 0) s.backoff_until = to_wall(backoff_until_);
  if (state_ == JobState::kStopping) {
    s.stop_rung = stop_rung_;
    if (stop_next_rung_) s.stop_next_rung = to_wall(*stop_next_rung_);
  }
  s.stop_intent = StopIntent();
  s.reset_pending = reset_pending_;
  return s;
}

}  // namespace tpud
