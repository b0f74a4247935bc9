// A Job performs what the job machine (job_machine.h) decides: requests and
// world events go in as machine events, effects come out and are carried out
// here. Watching the attempt (output, hangs, classification, incidents) is
// in job_watch.cc; carrying on after a tpud restart in job_restore.cc.
#include "daemon/supervisor/job.h"

#include <re2/re2.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/core/durations.h"
#include "daemon/process/run_as.h"

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
  policy_ = PolicyOf(spec);
  spec_ = std::move(spec);
}

machine::Policy Job::PolicyOf(const JobSpec& spec) const {
  machine::Policy policy = machine::Policy::Of(spec, deps_.preflight != nullptr, deps_.reset_tpu != nullptr);
  policy.gang = spec.gang && deps_.gang != nullptr;
  policy.worker = deps_.worker_id;
  policy.gang_local_reset = policy.gang && deps_.reset_is_local && deps_.reset_tpu != nullptr;
  return policy;
}

bool Job::MaintenanceActive() const { return deps_.maintenance_active && deps_.maintenance_active(); }

absl::Status Job::Start(const std::string& reason) { return Feed(machine::StartRequested{reason}); }
absl::Status Job::Stop(const std::string& reason) { return Feed(machine::StopRequested{reason}); }
absl::Status Job::Restart(const std::string& reason) { return Feed(machine::RestartRequested{reason}); }
void Job::StopForShutdown(const std::string& reason) { Deliver(machine::ShutdownRequested{reason}); }
bool Job::stopped_for_shutdown() const {
  return !IsActive(machine_.state) || (machine_.leaving && machine_.state == JobState::kBackoff);
}
void Job::OnMaintenanceNotice(const std::string& what) { Deliver(machine::MaintenanceNotice{what}); }
void Job::OnMaintenanceOver() { Deliver(machine::MaintenanceOver{}); }
void Job::OnSliceMembership(const std::string& conflict) { Deliver(machine::MembershipChanged{conflict}); }

void Job::OnGangCommitted(const GangCommit& commit) {
  Deliver(machine::GangCommitted{commit, MaintenanceActive()});
}
bool Job::wants_running() const { return machine_.wants_running(); }

absl::Status Job::Feed(machine::Event event) {
  pending_events_.push_back(std::move(event));
  if (feeding_) return absl::OkStatus();
  feeding_ = true;
  std::optional<absl::Status> first;
  while (!pending_events_.empty()) {
    machine::Event next = std::move(pending_events_.front());
    pending_events_.pop_front();
    machine::Decision decision = machine::Step(machine_, next, policy_);
    machine_ = std::move(decision.next);
    if (!first) first = decision.status;
    for (const machine::Effect& effect : decision.effects) Perform(effect);
  }
  feeding_ = false;
  return first.value_or(absl::OkStatus());
}

void Job::Deliver(machine::Event event) {
  const absl::Status status = Feed(std::move(event));
  if (!status.ok()) SPDLOG_ERROR("job {}: {}", spec_.name, std::string(status.message()));
}

void Job::FeedResult(machine::Event event) {
  if (!feeding_) {
    Deliver(std::move(event));
    return;
  }
  pending_events_.push_front(std::move(event));
}

void Job::Perform(const machine::Effect& effect) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, machine::Transition>) {
          PerformTransition(e);
        } else if constexpr (std::is_same_v<E, machine::SetReason>) {
          CancelTimer();
        } else if constexpr (std::is_same_v<E, machine::RunPreflight>) {
          RunPreflight();
        } else if constexpr (std::is_same_v<E, machine::PrepareAttempt>) {
          PrepareAttempt(e);
        } else if constexpr (std::is_same_v<E, machine::Launch>) {
          LaunchAttempt();
        } else if constexpr (std::is_same_v<E, machine::Signal>) {
          Signal(e.signal);
        } else if constexpr (std::is_same_v<E, machine::ArmTimer>) {
          ArmTimer(e);
        } else if constexpr (std::is_same_v<E, machine::ResetTpu>) {
          RunTpuReset(e);
        } else if constexpr (std::is_same_v<E, machine::OpenIncident>) {
          OpenIncident(e);
        } else if constexpr (std::is_same_v<E, machine::IncidentCounted>) {
          if (!incidents_.empty() && incidents_.back().open) incidents_.back().counted = e.counted;
        } else if constexpr (std::is_same_v<E, machine::IncidentOutcome>) {
          if (!incidents_.empty() && incidents_.back().open) {
            incidents_.back().outcome = e.outcome;
            PublishIncident();
          }
        } else if constexpr (std::is_same_v<E, machine::CloseIncident>) {
          CloseIncident(e.outcome);
        } else if constexpr (std::is_same_v<E, machine::RecordReset>) {
          if (!incidents_.empty() && incidents_.back().open) {
            incidents_.back().reset_backend = e.backend;
            incidents_.back().reset_duration = e.duration;
            incidents_.back().reset_result = e.result;
          }
        } else if constexpr (std::is_same_v<E, machine::Persist>) {
          deps_.listener->OnJobUpdated(spec_.name);
        } else if constexpr (std::is_same_v<E, machine::ProposeGeneration>) {
          if (deps_.gang != nullptr) deps_.gang->Propose(spec_.name, e.proposal);
        } else if constexpr (std::is_same_v<E, machine::ReportStopped>) {
          ReportStopped(e.generation);
        } else if constexpr (std::is_same_v<E, machine::Log>) {
          switch (e.level) {
            case machine::Log::kInfo: SPDLOG_INFO("{}", e.text); break;
            case machine::Log::kWarning: SPDLOG_WARN("{}", e.text); break;
            case machine::Log::kError: SPDLOG_ERROR("{}", e.text); break;
          }
        }
      },
      effect);
}

// The one place a state change is announced: logs, metrics, the event
// stream and the state store all hear of it from here.
void Job::PerformTransition(const machine::Transition& transition) {
  CancelTimer();  // Each state owns at most one timer; it dies with the state.
  const SteadyTime now = deps_.clock->Now();
  JobEvent event;
  event.time = deps_.clock->WallNow();
  event.job = spec_.name;
  event.from = transition.from;
  event.to = transition.to;
  event.reason = transition.reason;
  event.attempt = machine_.attempt;
  event.exit = transition.exit;
  if (transition.exit) last_exit_ = transition.exit;
  if (transition.to == JobState::kStarting) event.checkpoint = checkpoint_;
  if (!IsActive(transition.to)) goodput_.OnIdle(now);
  // Without a progress section, being up counts as progress for goodput.
  if (transition.to == JobState::kRunning && !spec_.progress.configured) goodput_.OnProgress(now, std::nullopt);
  state_since_ = event.time;
  deps_.listener->OnJobEvent(event);
}

namespace {

// Runs a checkpoint lookup with the job user's file permissions: tpud never
// lists, on a job's behalf, a directory its user could not list.
template <typename Lookup>
auto ReadAsJobUser(const absl::StatusOr<std::optional<RunAs>>& who, Lookup lookup) -> decltype(lookup()) {
  if (!who.ok()) return who.status();
  ScopedFsIdentity as(*who);
  if (!as.status().ok()) return as.status();
  return lookup();
}

}  // namespace

absl::StatusOr<std::optional<RunAs>> Job::JobUser() const {
  if (!deps_.resolve_run_as) return std::optional<RunAs>();
  return deps_.resolve_run_as(spec_.user, spec_.group);
}

void Job::RunPreflight() {
  const PreflightVerdict verdict = deps_.preflight(spec_);
  FeedResult(machine::PreflightChecked{verdict.status, verdict.reset_for, deps_.random()});
}

void Job::PrepareAttempt(const machine::PrepareAttempt& prepare) {
  attempt_started_ = deps_.clock->Now();
  absl::StatusOr<std::optional<CheckpointRef>> found = std::optional<CheckpointRef>();
  const absl::StatusOr<std::optional<RunAs>> who = JobUser();
  if (!who.ok()) {
    // No lookup: the launch reports the unknown user by name.
  } else if (!prepare.gang) {
    found = ReadAsJobUser(who, [&] { return deps_.find_checkpoint(spec_.checkpoint); });
  } else if (prepare.step) {
    // The step every worker holds, from this worker's own checkpoint of it.
    found = deps_.find_checkpoint_at_step
                ? ReadAsJobUser(who, [&] { return deps_.find_checkpoint_at_step(spec_.checkpoint, *prepare.step); })
                : absl::StatusOr<std::optional<CheckpointRef>>(absl::UnimplementedError("no step lookup"));
    if (found.ok() && !*found) {
      found = absl::NotFoundError(absl::StrCat("no complete checkpoint of step ", *prepare.step, " in ",
                                               spec_.checkpoint.dir.string()));
    }
  }
  checkpoint_ = found.ok() ? *found : std::nullopt;
  if (!incidents_.empty() && incidents_.back().open && checkpoint_) {
    incidents_.back().checkpoint_step = checkpoint_->step;
    PublishIncident();
  }
  machine::AttemptPrepared prepared;
  if (!found.ok()) {
    prepared.checkpoint_error = std::string(found.status().message());
    prepared.failure =
        AttemptScanner(classifier_).Classify(machine::CheckpointLookupExit(prepared.checkpoint_error), false);
  }
  FeedResult(std::move(prepared));
}

void Job::LaunchAttempt() {
  LaunchSpec launch = BuildLaunchSpec();
  absl::Status status;
  if (deps_.resolve_run_as) {
    absl::StatusOr<std::optional<RunAs>> run_as = JobUser();
    if (run_as.ok()) {
      launch.run_as = *run_as;
      if (launch.run_as && spec_.working_dir.empty()) {
        // Not tpud's state dir, which the user may not read: its home, or "/"
        // for a system user whose home does not exist (nobody's /nonexistent).
        std::error_code ec;
        launch.working_dir = std::filesystem::is_directory(launch.run_as->home, ec) ? launch.run_as->home : "/";
      }
    } else {
      status = run_as.status();
    }
  }
  const bool gang = spec_.gang && deps_.gang != nullptr;
  if (status.ok() && gang) {
    // One trainer per worker id: another tpud's attempt of it still runs
    // (it held this id before this tpud took it over). Retried, uncounted.
    if (std::string held = deps_.gang->AttemptHeldElsewhere(spec_.name); !held.empty()) {
      status = absl::UnavailableError(held);
    }
  }
  if (status.ok()) {
    absl::StatusOr<std::unique_ptr<Attempt>> launched = deps_.launcher->Launch(launch, this);
    if (launched.ok()) {
      attempt_ = std::move(*launched);
      attempt_env_ = launch.env;
      // A starting attempt (the shim's report is on its way) says how it
      // went through OnStarted; the loop goes on meanwhile, and status must
      // not show the last attempt's progress as this one's.
      if (attempt_->starting()) {
        progress_.reset();
        return;
      }
      AttemptRunning();
    } else {
      status = launched.status();
    }
  }
  FeedResult(machine::Launched{status, deps_.random()});
}

void Job::AttemptRunning() {
  log_dropped_before_ += std::exchange(log_dropped_attempt_, 0);
  log_dropping_ = false;
  if (spec_.gang && deps_.gang != nullptr) {
    deps_.gang->AttemptChanged(spec_.name, machine_.attempt, attempt_->pid(), machine_.generation);
  }
  goodput_.OnAttemptStart(attempt_started_,
                          checkpoint_ ? std::optional<std::int64_t>(checkpoint_->step) : std::nullopt);
  BeginAttemptWatch();
}

void Job::OnStarted(const absl::Status& status) {
  if (status.ok()) {
    AttemptRunning();
  } else {
    attempt_.reset();
    attempt_env_.clear();
  }
  Deliver(machine::Launched{status, deps_.random()});
}

void Job::ReportStopped(std::int64_t generation) {
  GangReport report;
  report.worker = deps_.worker_id;
  report.generation = generation;
  if (deps_.list_checkpoint_steps) {
    absl::StatusOr<std::vector<std::int64_t>> steps =
        ReadAsJobUser(JobUser(), [&] { return deps_.list_checkpoint_steps(spec_.checkpoint); });
    if (steps.ok()) {
      report.steps = *std::move(steps);
    } else {
      // Reported as holding none: the gang then starts from a step this
      // worker can surely take (scratch) rather than one it cannot read.
      SPDLOG_WARN("job {}: checkpoints: {}; reporting none to the gang", spec_.name,
                  std::string(steps.status().message()));
    }
  }
  if (deps_.gang != nullptr) deps_.gang->Report(spec_.name, report);
}

void Job::Signal(int signal) {
  if (attempt_ == nullptr) return;
  if (absl::Status s = attempt_->SignalGroup(signal); !s.ok()) {
    SPDLOG_WARN("job {}: {}", spec_.name, std::string(s.message()));
  }
}

void Job::RunTpuReset(const machine::ResetTpu& reset) {
  if (!deps_.reset_tpu) return;  // The policy says no backend: never asked.
  TpuResetRequest request;
  request.job = spec_.name;
  request.failure_class = reset.failure_class;
  const std::uint64_t generation = reset.generation;
  deps_.reset_tpu(request, [this, generation](TpuResetResult result) {
    machine::ResetDone done;
    done.generation = generation;
    done.attempted = result.attempted;
    done.backend = result.backend;
    done.duration = result.duration;
    done.result = result.status.ok() ? "ok" : std::string(result.status.message());
    done.jitter = deps_.random();
    Deliver(std::move(done));
  });
}

void Job::ArmTimer(const machine::ArmTimer& timer) {
  CancelTimer();
  const std::chrono::nanoseconds delay = ToNanos(std::max(timer.delay, Seconds(0)));
  timer_kind_ = timer.kind;
  timer_due_ = deps_.clock->Now() + delay;
  timer_ = deps_.clock->RunAfter(delay, [this, kind = timer.kind, rung = timer.rung] {
    timer_ = 0;
    Deliver(machine::TimerFired{kind, rung, MaintenanceActive()});
  });
}

void Job::CancelTimer() {
  if (timer_ != 0) deps_.clock->Cancel(timer_);
  timer_ = 0;
}

void Job::OnExit(const ExitStatus& status) {
  attempt_.reset();
  if (spec_.gang && deps_.gang != nullptr) deps_.gang->AttemptChanged(spec_.name, machine_.attempt, 0, machine_.generation);
  const SteadyTime now = deps_.clock->Now();
  const bool hung = machine_.state == JobState::kStopping && machine_.stop == machine::StopIntent::kHang;
  goodput_.OnAttemptEnd(now, hung                                             ? AttemptEnd::kHung
                             : status.succeeded() && !machine_.notice_sent ? AttemptEnd::kSucceeded
                                                                           : AttemptEnd::kOther);
  last_exit_ = status;
  machine::AttemptExited exited;
  exited.exit = status;
  exited.failure = ClassifyFailure(status, hung);
  exited.uptime = now - attempt_started_;
  if (progress_) exited.step = progress_->last_step();
  exited.maintenance_active = MaintenanceActive();
  exited.jitter = deps_.random();
  EndAttemptWatch();
  Deliver(std::move(exited));
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

LaunchSpec Job::BuildLaunchSpec() const {
  LaunchSpec launch;
  launch.job = spec_.name;
  launch.attempt = machine_.attempt;
  launch.argv = spec_.command;
  launch.env = spec_.env;
  launch.clean_environment = true;  // tpud's own environment is not the job's.
  launch.env["TPUD_JOB"] = spec_.name;
  launch.env["TPUD_ATTEMPT"] = std::to_string(machine_.attempt);
  launch.env["TPUD_CHECKPOINT"] = checkpoint_ ? checkpoint_->path.string() : "";
  launch.env["TPUD_CHECKPOINT_STEP"] = checkpoint_ ? std::to_string(checkpoint_->step) : "";
  if (policy_.gang) {
    launch.env["TPUD_WORKER_ID"] = std::to_string(deps_.worker_id);
    launch.env["TPUD_NUM_WORKERS"] = std::to_string(deps_.num_workers);
    launch.env["TPUD_GANG_GENERATION"] = std::to_string(machine_.generation);
  }
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

namespace {

const char* StopIntentName(machine::StopIntent intent) {
  switch (intent) {
    case machine::StopIntent::kStop: return "stop";
    case machine::StopIntent::kRestart: return "restart";
    case machine::StopIntent::kHang: return "hang";
    case machine::StopIntent::kGang: return "gang";
    case machine::StopIntent::kNone: break;
  }
  return "";
}

}  // namespace

JobSnapshot Job::Snapshot() const {
  JobSnapshot s;
  s.name = spec_.name;
  s.state = machine_.state;
  s.reason = machine_.reason;
  s.state_since = state_since_;
  s.pid = attempt_ ? attempt_->pid() : 0;
  s.attempt = machine_.attempt;
  s.restarts = machine_.restarts;
  s.last_exit = last_exit_;
  s.checkpoint = checkpoint_;
  const SteadyTime now = deps_.clock->Now();
  if (attempt_) s.uptime = now - attempt_started_;
  const bool backoff_timer =
      machine_.state == JobState::kBackoff && timer_ != 0 && timer_kind_ == machine::TimerKind::kBackoff;
  if (backoff_timer) s.backoff_remaining = std::max(Seconds(0), Seconds(timer_due_ - now));
  s.attempts_total = machine_.attempts_total;
  s.restarts_by_reason = machine_.restarts_by_reason;
  s.failures_by_class = machine_.failures_by_class;
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
  if (backoff_timer) s.backoff_until = to_wall(timer_due_);
  if (machine_.state == JobState::kStopping) {
    s.stop_rung = machine_.stop_rung;
    if (timer_ != 0 && timer_kind_ == machine::TimerKind::kStopRung) {
      s.stop_next_rung = to_wall(timer_due_);
      s.stop_next_rung_in = std::max(Seconds(0), Seconds(timer_due_ - now));
    }
    s.stop_intent = StopIntentName(machine_.stop);
  }
  s.reset_pending = machine_.reset_pending;
  s.gang_generation = machine_.generation;
  s.gang = machine_.gang;
  s.gang_failed_generation = machine_.failed_generation;
  return s;
}

}  // namespace tpud
