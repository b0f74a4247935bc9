#include "daemon/supervisor/job_machine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/durations.h"
#include "daemon/core/backoff.h"
#include "daemon/core/restart_rules.h"

namespace tpud::machine {
namespace {

using absl::StrCat;

// Why a gang worker leaving on shutdown launches nothing.
constexpr char kNotLaunching[] = "not launching: tpud is stopping; its next run follows the gang";

std::string Summary(const Classification& failure, const ExitStatus& exit) {
  return StrCat(FailureClassName(failure.failure_class), ": ", exit.Describe());
}

// Builds one decision: the next state and the effects, in order.
class Decider {
 public:
  Decider(const State& state, const Policy& policy) : s_(state), p_(policy) {}

  Decision Done(absl::Status status = absl::OkStatus()) { return {std::move(s_), std::move(fx_), status}; }

  // --- requests ---
  Decision Start(const std::string& reason) {
    if (p_.gang) return GangRequest(GangProposal::Intent::kStart, reason);
    if (IsActive(s_.state)) {
      return Done(absl::FailedPreconditionError(
          StrCat("job \"", p_.job, "\" is already ", JobStateName(s_.state))));
    }
    s_.restarts = 0;
    s_.preflight_failures = 0;
    BeginLaunch(reason);
    return Done();
  }

  Decision Stop(const std::string& reason) {
    StopHere(reason);
    // A gang: the stop sticks on this worker at once, etcd or not; the
    // proposal stops every other worker.
    if (p_.gang) return GangRequest(GangProposal::Intent::kStop, reason);
    return Done();
  }

  Decision Shutdown(const std::string& reason) {
    if (!p_.gang) return Stop(reason);
    // Done here (succeeded, failed, stopped): nothing to leave; the gang
    // must not be restarted for it.
    if (!IsActive(s_.state)) return Done();
    s_.leaving = true;
    // The others must stop and wait for this worker rather than block at
    // their next collective or barrier: when the gang runs (or this worker's
    // attempt does, with no commit seen), and when this worker already
    // reported a stopping generation (the leader would start it without
    // this worker). A hang being stopped fails the gang anyway, counted.
    const bool gang_running = s_.gang ? s_.gang->phase == GangPhase::kStarting : s_.attempt_alive;
    const bool reported = s_.gang && s_.gang->phase == GangPhase::kStopping &&
                          s_.reported_generation == s_.gang->generation;
    const bool hang = s_.state == JobState::kStopping && s_.stop == StopIntent::kHang;
    if ((gang_running || reported) && !hang) {
      ProposeLeave(s_.gang ? s_.gang->generation : s_.generation, StrCat("worker ", p_.worker, " left: ", reason));
    }
    const std::string why = StrCat(reason, ": leaving the gang until tpud is back");
    switch (s_.state) {
      case JobState::kStarting:
      case JobState::kRunning:
        StopAttempt(why, StopIntent::kGang);
        break;
      case JobState::kBackoff:
        // No attempt: wait here, persisted as waiting for the gang, which
        // the next tpud follows (no launch, reset or report meanwhile).
        WaitForGang(why);
        fx_.push_back(Persist{});
        break;
      default:
        break;  // Stopping goes on as it was.
    }
    return Done();
  }

  // Stops this worker's attempt (or its wait) for a person's stop.
  void StopHere(const std::string& reason) {
    switch (s_.state) {
      case JobState::kBackoff:
        fx_.push_back(CloseIncident{"stopped"});
        TransitionTo(JobState::kStopped, reason);
        break;
      case JobState::kStarting:
      case JobState::kRunning:
        StopAttempt(reason, StopIntent::kStop);
        break;
      case JobState::kStopping:
        s_.stop = StopIntent::kStop;  // The person's stop wins over a restart or tpud's hang handling.
        break;
      default:
        break;  // Stopping an inactive job is a no-op, as with systemctl stop.
    }
  }

  Decision Restart(const std::string& reason) {
    if (p_.gang) return GangRequest(GangProposal::Intent::kRestart, reason);
    switch (s_.state) {
      case JobState::kStarting:
      case JobState::kRunning:
        StopAttempt(reason, StopIntent::kRestart);
        return Done();
      case JobState::kStopping:
        s_.stop = StopIntent::kRestart;  // The person's restart wins over tpud's own hang handling.
        return Done();
      case JobState::kBackoff:
        s_.restarts = 0;
        BeginLaunch(reason);
        return Done();
      default:
        return Start(reason);
    }
  }

  // --- launching ---
  // Preflight first when configured, then the attempt.
  void BeginLaunch(const std::string& reason) {
    if (s_.leaving) return WaitForGang(kNotLaunching);
    if (!s_.not_member.empty()) return WaitForGang(NotMemberWhy());
    s_.launch_reason = reason;
    if (p_.preflight) {
      fx_.push_back(RunPreflight{});
    } else {
      Prepare();
    }
  }

  void Prepare() {
    ++s_.attempt;
    ++s_.attempts_total;
    s_.notice_sent = false;
    s_.notice_what.clear();
    fx_.push_back(PrepareAttempt{p_.gang, p_.gang ? s_.resume_step : std::nullopt});
  }

  Decision Preflight(const PreflightChecked& e) {
    if (s_.leaving) {
      WaitForGang(kNotLaunching);
      return Done();
    }
    if (e.status.ok()) {
      s_.preflight_failures = 0;
      Prepare();
      return Done();
    }
    ++s_.preflight_failures;
    const std::string why = StrCat("preflight: ", e.status.message());
    if (e.reset_for && p_.can_reset && s_.preflight_failures == 1) {
      DelayLaunch(StrCat(why, "; resetting the TPU"));
      s_.wait = Wait::kPreflightReset;
      fx_.push_back(ResetTpu{*e.reset_for, ++s_.reset_generation});
      return Done();
    }
    const Seconds delay = BackoffDelay(p_.restart, s_.preflight_failures, e.jitter);
    DelayLaunch(StrCat(why, "; checking again in ", FormatSeconds(delay)));
    Wait(delay);
    return Done();
  }

  Decision Prepared(const AttemptPrepared& e) {
    TransitionTo(JobState::kStarting, s_.launch_reason);
    if (e.checkpoint_error.empty()) {
      // Alive from here: a launcher may report the start later (Launched),
      // and a stop meanwhile signals the attempt, which passes the signal on
      // once its trainer runs.
      s_.attempt_alive = true;
      fx_.push_back(Launch{});
      return Done();
    }
    AttemptExited failed;
    failed.exit = CheckpointLookupExit(e.checkpoint_error);
    failed.failure = e.failure;
    Fail(failed);
    return Done();
  }

  Decision LaunchResult(const Launched& e) {
    if (e.status.ok()) {
      s_.launch_retries = 0;
      // Stopping already (a stop came while it started): the stop goes on.
      if (s_.state == JobState::kStarting) fx_.push_back(ArmTimer{TimerKind::kStartSeconds, Seconds(p_.start_seconds)});
      return Done();
    }
    s_.attempt_alive = false;
    if (s_.state == JobState::kStopping) {
      // Stopped while it started, and it never ran: the stop is done, as if
      // it had exited (a gang's stop then follows the gang).
      AttemptExited never_ran;
      never_ran.exit.spawn_error = std::string(e.status.message());
      never_ran.jitter = e.jitter;
      return Exited(never_ran);
    }
    const bool transient = e.status.code() == absl::StatusCode::kUnavailable ||
                           e.status.code() == absl::StatusCode::kResourceExhausted;
    if (transient) {
      // Out of processes, fds, memory or disk for a moment: not the job's
      // fault, and not permanent. Retry with the restart backoff, uncounted.
      ++s_.launch_retries;
      const Seconds delay = BackoffDelay(p_.restart, s_.launch_retries, e.jitter);
      fx_.push_back(Log{Log::kWarning, StrCat("job ", p_.job, ": launch failed: ", e.status.message())});
      DelayLaunch(StrCat("launch failed: ", e.status.message(), " (transient; retry ", s_.launch_retries, " in ",
                         FormatSeconds(delay), ", not counted against max_restarts)"));
      Wait(delay);
      return Done();
    }
    // A missing executable, working_dir or user does not fix itself: fail now.
    ExitStatus exit;
    exit.spawn_error = std::string(e.status.message());
    if (p_.gang) {  // The whole gang, through the slice.
      AttemptExited failed;
      failed.exit = exit;
      failed.failure.failure_class = FailureClass::kUnknown;
      failed.failure.action = RecoveryAction::kFail;
      failed.failure.rule = "exit:spawn_error";
      failed.failure.hint = "the attempt cannot be launched on this worker; fix the spec or the worker";
      Fail(failed);
      return Done();
    }
    fx_.push_back(CloseIncident{StrCat("gave up: ", exit.Describe())});
    TransitionTo(JobState::kFailed, exit.Describe(), exit);
    return Done();
  }

  // BACKOFF with `why`: a transition from any other state; in BACKOFF
  // already, the same state with a new reason (and its timer gone).
  void DelayLaunch(const std::string& why) {
    if (s_.state != JobState::kBackoff) return TransitionTo(JobState::kBackoff, why);
    s_.reason = why;
    fx_.push_back(SetReason{why});
  }

  // The deadline is only known once the timer is armed: persist after it.
  void Wait(Seconds delay) {
    s_.wait = Wait::kTimer;
    fx_.push_back(ArmTimer{TimerKind::kBackoff, delay});
    fx_.push_back(Persist{});
  }

  // --- timers ---
  Decision Timer(const TimerFired& e) {
    switch (e.kind) {
      case TimerKind::kStartSeconds:
        if (s_.state != JobState::kStarting) break;
        TransitionTo(JobState::kRunning, StrCat("up for ", FormatSeconds(Seconds(p_.start_seconds))));
        fx_.push_back(CloseIncident{"restarted"});
        break;
      case TimerKind::kBackoff:
        if (s_.state != JobState::kBackoff || s_.wait != Wait::kTimer) break;
        if (e.maintenance_active) {
          s_.wait = Wait::kMaintenance;  // MaintenanceOver launches.
          break;
        }
        BeginLaunch(s_.launch_reason);
        break;
      case TimerKind::kStopRung:
        if (s_.state == JobState::kStopping && s_.attempt_alive) SendRung(e.rung);
        break;
    }
    return Done();
  }

  // STOPPING for `intent`: the ladder's first signal goes out.
  void StopAttempt(std::string reason, StopIntent intent) {
    TransitionTo(JobState::kStopping, std::move(reason));
    s_.stop = intent;
    SendRung(0);
  }

  void SendRung(int rung) {
    const std::vector<int>& signals = p_.stop.signals;
    if (!s_.attempt_alive || rung < 0 || rung >= static_cast<int>(signals.size())) return;
    fx_.push_back(Signal{signals[rung]});
    s_.stop_rung = rung;
    if (rung + 1 < static_cast<int>(signals.size())) {
      fx_.push_back(ArmTimer{TimerKind::kStopRung, Seconds(p_.stop.grace_seconds), rung + 1});
    }
    fx_.push_back(Persist{});
  }

  // --- the attempt ends ---
  Decision Exited(const AttemptExited& e) {
    s_.attempt_alive = false;
    if (s_.state == JobState::kStopping && s_.stop == StopIntent::kGang) {
      // Stopped because the gang moved on: no failure of this worker's own.
      TransitionTo(JobState::kBackoff, StrCat("stopped for gang generation ", s_.gang ? s_.gang->generation : 0,
                                              " (", e.exit.Describe(), ")"),
                   e.exit);
      s_.wait = Wait::kGang;
      FollowCommit();
      return Done();
    }
    if (s_.state == JobState::kStopping && s_.stop != StopIntent::kHang) {
      const bool restart = s_.stop == StopIntent::kRestart;
      fx_.push_back(CloseIncident{"stopped"});  // Stopped before it was up: the last failure's recovery ends.
      TransitionTo(JobState::kStopped, StrCat("stopped (", e.exit.Describe(), ")"), e.exit);
      if (restart) {
        s_.restarts = 0;
        BeginLaunch("restart requested");
      }
      return Done();
    }
    if (!IsActive(s_.state) || s_.state == JobState::kBackoff) {
      fx_.push_back(Log{Log::kError, StrCat("job ", p_.job, ": exit in state ", JobStateName(s_.state), " ignored")});
      return Done();
    }
    if (e.exit.succeeded() && s_.stop != StopIntent::kHang && !s_.notice_sent) {
      fx_.push_back(CloseIncident{"restarted"});  // Done before start_seconds: the restart still worked.
      TransitionTo(JobState::kSucceeded, StrCat("exited 0 after ", FormatSeconds(e.uptime)), e.exit);
      return Done();
    }
    Fail(e);
    return Done();
  }

  void Fail(const AttemptExited& e) {
    if (p_.gang) return GangFail(e);
    const Classification& failure = e.failure;
    ++s_.failures_by_class[FailureClassName(failure.failure_class)];
    if (e.uptime.count() >= p_.restart.reset_after_seconds) s_.restarts = 0;  // Healthy long enough.
    fx_.push_back(OpenIncident{e.exit, failure, e.step});
    const bool repeats = Repeats(failure, e.step);
    s_.last_failure = PastFailure{s_.attempt, failure.failure_class, failure.rule, e.step};
    const std::string summary = Summary(failure, e.exit);
    if (failure.action == RecoveryAction::kFail) {
      return GiveUp(e.exit, StrCat(summary, " is not fixed by restarting", failure.hint.empty() ? "" : ": ",
                                   failure.hint));
    }
    if (repeats) {
      return GiveUp(e.exit, StrCat(summary, " again at step ", *e.step,
                                   ": the same failure at the same step twice in a row is deterministic; "
                                   "not retrying"));
    }
    if (failure.action == RecoveryAction::kWaitAndRestart) {
      fx_.push_back(IncidentCounted{false});  // Preemption is not the job's fault (Kubernetes' Ignore).
      if (e.maintenance_active) return WaitForMaintenance(e.exit);
      return ScheduleRestart({e.exit, failure, false}, std::nullopt, e.jitter);
    }
    if (CountRestart(p_.restart, s_.restarts, std::nullopt).exhausted) {  // The count was reset above.
      return GiveUp(e.exit, StrCat("gave up after ", s_.restarts, " restart", s_.restarts == 1 ? "" : "s",
                                   " (max_restarts ", p_.restart.max_restarts, "): ", summary));
    }
    if (failure.action == RecoveryAction::kResetAndRestart && p_.can_reset) {
      // BACKOFF while the TPU is reset off the loop; the restart follows
      // whatever the reset's outcome, which the incident records.
      fx_.push_back(IncidentOutcome{"resetting the TPU"});
      TransitionTo(JobState::kBackoff, StrCat(summary, "; resetting the TPU"), e.exit);
      s_.wait = Wait::kFailureReset;
      s_.reset_pending = failure.failure_class;
      s_.pending = PendingRestart{e.exit, failure, true};
      fx_.push_back(ResetTpu{failure.failure_class, ++s_.reset_generation});
      return;
    }
    ScheduleRestart({e.exit, failure, true}, std::nullopt, e.jitter);
  }

  // The same class and rule as the failure of the attempt just before, both
  // at the same known step: deterministic. Never for preemptions.
  bool Repeats(const Classification& failure, const std::optional<std::int64_t>& step) const {
    const std::optional<PastFailure>& last = s_.last_failure;
    if (!last || last->attempt != s_.attempt - 1) return false;
    return IsDeterministicRepeat(FailureSeen{failure.failure_class, failure.rule, step},
                                 FailureSeen{last->failure_class, last->rule, last->step});
  }

  void ScheduleRestart(const PendingRestart& restart, const std::optional<ResetDone>& reset, double jitter) {
    const Classification& failure = restart.failure;
    std::string budget = "not counted against max_restarts";
    if (restart.counted) {
      ++s_.restarts;
      ++s_.restarts_by_reason[FailureClassName(failure.failure_class)];
      budget = StrCat("restart ", s_.restarts, "/", p_.restart.max_restarts);
    }
    if (failure.action == RecoveryAction::kResetAndRestart) {
      if (!p_.can_reset) {
        budget += "; no TPU reset backend configured, restarting without a reset";
      } else if (reset && reset->attempted) {
        budget += StrCat("; TPU reset (", reset->backend, ") ",
                         reset->result == "ok" ? "done" : "failed: " + reset->result);
      }
    }
    const Seconds delay = BackoffDelay(p_.restart, std::max(s_.restarts, 1), jitter);
    const std::string what = StrCat(Summary(failure, restart.exit), "; ", budget);
    fx_.push_back(IncidentOutcome{StrCat("restarting in ", FormatSeconds(delay))});
    if (s_.state == JobState::kBackoff) {
      DelayLaunch(StrCat(what, " in ", FormatSeconds(delay)));  // After a reset: same state, new plan.
    } else {
      TransitionTo(JobState::kBackoff, StrCat(what, " in ", FormatSeconds(delay)), restart.exit);
    }
    s_.launch_reason = what;
    Wait(delay);
  }

  void WaitForMaintenance(const ExitStatus& exit) {
    fx_.push_back(IncidentOutcome{"waiting for the maintenance event to end"});
    TransitionTo(JobState::kBackoff, StrCat("preemption: ", exit.Describe(),
                                            "; waiting for the maintenance event to end (not counted against "
                                            "max_restarts)"),
                 exit);
    s_.wait = Wait::kMaintenance;
  }

  void GiveUp(const ExitStatus& exit, const std::string& why) {
    fx_.push_back(CloseIncident{StrCat("gave up: ", why)});
    TransitionTo(JobState::kFailed, why, exit);
  }

  Decision ResetFinished(const ResetDone& e) {
    if (s_.state != JobState::kBackoff || e.generation != s_.reset_generation) return Done();  // Stale.
    if (s_.wait == Wait::kGangReset) {
      if (e.attempted && e.result != "ok") {
        fx_.push_back(Log{Log::kWarning, StrCat("job ", p_.job, ": TPU reset (", e.backend, ") failed: ", e.result)});
      }
      s_.wait = Wait::kGang;
      Report();
      return Done();
    }
    if (s_.wait == Wait::kPreflightReset) {
      BeginLaunch(s_.launch_reason);
      return Done();
    }
    if (s_.wait != Wait::kFailureReset || !s_.pending) return Done();
    const PendingRestart restart = *s_.pending;
    s_.pending.reset();
    s_.reset_pending.reset();
    if (e.attempted) fx_.push_back(RecordReset{e.backend, e.duration, e.result});
    ScheduleRestart(restart, e, e.jitter);
    return Done();
  }

  // --- the world ---
  Decision Hang(const HangDetected& e) {
    if (!s_.attempt_alive || (s_.state != JobState::kStarting && s_.state != JobState::kRunning)) return Done();
    StopAttempt(e.reason, StopIntent::kHang);
    return Done();
  }

  Decision Notice(const MaintenanceNotice& e) {
    if (!s_.attempt_alive || s_.notice_sent) return Done();
    if (s_.state != JobState::kStarting && s_.state != JobState::kRunning) return Done();
    s_.notice_sent = true;
    s_.notice_what = e.what;
    fx_.push_back(Log{Log::kInfo, StrCat("job ", p_.job, ": ", e.what, ": sending ", SignalName(p_.checkpoint_signal),
                                    " so it can checkpoint")});
    fx_.push_back(Signal{p_.checkpoint_signal});
    return Done();
  }

  Decision NoticeOver() {
    if (p_.gang) {  // Report the stop the gang waits for.
      const bool held = s_.maintenance_hold;
      s_.maintenance_hold = false;
      if (held && s_.state == JobState::kBackoff && s_.wait == Wait::kMaintenance) {
        s_.wait = Wait::kGang;
        FollowCommit();
      }
      return Done();
    }
    if (s_.state == JobState::kBackoff && s_.wait == Wait::kMaintenance) BeginLaunch("the maintenance event is over");
    return Done();
  }

  // --- after a tpud restart ---
  Decision Resume(const Resumed& e) {
    if (e.adopted) return ResumeAdopted(e);
    switch (s_.state) {
      case JobState::kStarting:
      case JobState::kRunning:
      case JobState::kStopping: {
        if (s_.state == JobState::kStopping && !s_.wants_running()) {
          TransitionTo(JobState::kStopped, "its attempt ended while tpud was down");
          return Done();
        }
        // Not the job's fault: classified as a preemption, so not counted.
        s_.notice_sent = true;
        s_.notice_what = "attempt lost while tpud was down";
        AttemptExited lost;
        lost.exit.spawn_error = "the attempt was gone when tpud started (VM reboot or crash)";
        lost.failure = NoticeClassification(s_.notice_what);
        lost.maintenance_active = e.maintenance_active;
        lost.jitter = e.jitter;
        Fail(lost);
        return Done();
      }
      case JobState::kBackoff:
        ResumeBackoff(e);
        return Done();
      default:
        return Done();
    }
  }

  Decision ResumeAdopted(const Resumed& e) {
    s_.attempt_alive = true;
    s_.attempt = std::max(s_.attempt, e.adopted_attempt);
    if (s_.state == JobState::kStarting) {
      fx_.push_back(ArmTimer{TimerKind::kStartSeconds, std::max(e.start_left.value_or(Seconds(0)), Seconds(0))});
    } else if (s_.state == JobState::kStopping) {
      if (s_.stop_rung < 0) {
        SendRung(0);
      } else if (s_.stop_rung + 1 < static_cast<int>(p_.stop.signals.size())) {
        const Seconds due = std::max(e.rung_due_in.value_or(Seconds(0)), Seconds(0));
        fx_.push_back(ArmTimer{TimerKind::kStopRung, due, s_.stop_rung + 1});
      }  // Else the last signal went out: wait for the exit.
    } else if (s_.state != JobState::kRunning) {
      // A record older than the attempt (tpud died between the launch and
      // its record): the attempt is what counts, and it is up. Nothing
      // changed but what tpud remembers: no event.
      s_.state = JobState::kRunning;
      s_.wait = Wait::kNone;
      s_.reset_pending.reset();
      s_.pending.reset();
      fx_.push_back(Persist{});
    }
    return Done();
  }

  void ResumeBackoff(const Resumed& e) {
    if (p_.gang) {
      s_.wait = Wait::kGang;  // The slice tells the current generation (GangCommitted).
      return;
    }
    if (s_.reset_pending && p_.can_reset && s_.pending) {
      // An unreset TPU is never restarted on because tpud happened to restart.
      s_.wait = Wait::kFailureReset;
      s_.reason = StrCat(s_.reason, " (reset redone after a tpud restart)");
      fx_.push_back(Log{Log::kInfo, StrCat("job ", p_.job, ": the TPU reset due before tpud restarted is redone")});
      fx_.push_back(ResetTpu{*s_.reset_pending, ++s_.reset_generation});
      return;
    }
    s_.launch_reason = "resuming after a tpud restart";
    if (e.backoff_left) {
      fx_.push_back(Log{Log::kInfo, StrCat("job ", p_.job, ": backoff resumes with ", FormatSeconds(*e.backoff_left),
                                      " left")});
      return Wait(std::max(*e.backoff_left, Seconds(0)));
    }
    // No timer was running: a maintenance wait (or a reset without a backend now).
    if (e.maintenance_active) {
      s_.wait = Wait::kMaintenance;
      return;
    }
    BeginLaunch(s_.launch_reason);
  }


  // --- gangs (core/gang.h) ---
  // A person's request: a proposal to the slice; what happens comes back as
  // GangCommitted. Start while the gang is active is refused, as for a job.
  Decision GangRequest(GangProposal::Intent intent, const std::string& reason) {
    const bool active = s_.gang && (s_.gang->phase == GangPhase::kStarting || s_.gang->phase == GangPhase::kStopping);
    if (intent == GangProposal::Intent::kStart && active) {
      return Done(absl::FailedPreconditionError(StrCat("job \"", p_.job, "\" is already active as a gang (generation ",
                                                       s_.gang->generation, ": ", GangPhaseName(s_.gang->phase),
                                                       ")")));
    }
    if (intent == GangProposal::Intent::kStop && !active) return Done();  // As systemctl stop: a no-op.
    GangProposal proposal;
    proposal.intent = intent;
    proposal.base_generation = s_.gang ? s_.gang->generation : 0;
    proposal.worker = p_.worker;
    proposal.reason = reason;
    proposal.restart = p_.restart;
    fx_.push_back(ProposeGeneration{proposal});
    return Done();
  }

  // A failure on this worker: the gang decides (the leader: the budget, a
  // deterministic failure, the step), so propose its next generation and
  // wait for the commit. Once the gang is past this attempt's generation,
  // the failure is part of that restart already: nothing to propose.
  void GangFail(const AttemptExited& e) {
    const Classification& failure = e.failure;
    ++s_.failures_by_class[FailureClassName(failure.failure_class)];
    fx_.push_back(OpenIncident{e.exit, failure, e.step});
    const bool counted = failure.action != RecoveryAction::kWaitAndRestart;
    if (!counted) fx_.push_back(IncidentCounted{false});
    s_.last_failure = PastFailure{s_.attempt, failure.failure_class, failure.rule, e.step};
    s_.failed_generation = s_.generation;
    s_.maintenance_hold = e.maintenance_active;
    const std::string summary = Summary(failure, e.exit);
    const bool moot = s_.gang && s_.gang->generation > s_.generation;
    if (!moot) {
      GangProposal proposal;
      proposal.intent = GangProposal::Intent::kRestart;
      proposal.base_generation = s_.generation;
      proposal.worker = p_.worker;
      proposal.reason = StrCat("worker ", p_.worker, ": ", summary);
      proposal.failure = failure;
      proposal.step = e.step;
      proposal.counted = counted;
      proposal.restart = p_.restart;
      fx_.push_back(ProposeGeneration{proposal});
    }
    fx_.push_back(IncidentOutcome{"the gang restarts together"});
    TransitionTo(JobState::kBackoff, StrCat(summary, "; stopping the gang, every worker restarts together"), e.exit);
    s_.wait = Wait::kGang;
    FollowCommit();
  }

  Decision Gang(const GangCommitted& e) {
    if (!p_.gang) return Done();
    const GangCommit& commit = e.commit;
    if (s_.gang && (commit.generation < s_.gang->generation || *s_.gang == commit)) return Done();  // Stale or known.
    s_.gang = commit;
    if (!s_.attempt_alive) {
      if (e.maintenance_active) s_.maintenance_hold = true;
      FollowCommit();
      return Done();
    }
    if (commit.generation <= s_.generation) return Done();  // This attempt is of the current generation.
    // The gang moved past this attempt: stop it (a person's stop keeps its meaning).
    const std::string why = StrCat("gang generation ", commit.generation, ": ", commit.reason);
    if (s_.state == JobState::kStarting || s_.state == JobState::kRunning) {
      StopAttempt(why, StopIntent::kGang);
    } else if (s_.state == JobState::kStopping && s_.stop != StopIntent::kStop) {
      s_.stop = StopIntent::kGang;
    }
    return Done();
  }

  // With no attempt alive: do what the newest commit asks of this worker.
  void FollowCommit() {
    if (s_.attempt_alive) return;
    if (!s_.not_member.empty()) return WaitForGang(NotMemberWhy());
    if (!s_.gang) return;
    const GangCommit& commit = *s_.gang;
    const std::string what = StrCat("gang generation ", commit.generation, ": ", commit.reason);
    switch (commit.phase) {
      case GangPhase::kStopping:
        if (commit.generation <= s_.reported_generation || commit.generation <= s_.generation) return;
        if (s_.maintenance_hold) {  // The gang waits for this VM's maintenance event to end.
          DelayLaunch(StrCat(what, "; waiting for this worker's maintenance event to end"));
          s_.wait = Wait::kMaintenance;
          return;
        }
        WaitForGang(StrCat(what, "; waiting for every worker to stop"));
        if (p_.gang_local_reset && commit.reset_class && !s_.leaving) {
          s_.wait = Wait::kGangReset;
          fx_.push_back(ResetTpu{*commit.reset_class, ++s_.reset_generation});
          return;
        }
        Report();
        return;
      case GangPhase::kStarting:
        // This worker's attempt of that generation failed here (and was
        // proposed), or is being launched: nothing new to do.
        if (commit.generation < s_.generation || commit.generation == s_.failed_generation) return;
        if (commit.generation == s_.generation && s_.state != JobState::kBackoff) return;
        if (commit.generation == s_.generation && s_.wait != Wait::kGang) return;  // A launch retry is armed.
        if (commit.generation == s_.generation && !s_.leaving) {
          // This worker's attempt of the running generation is gone and the
          // gang was never told (a tpud that stopped it on exit, with etcd
          // out of reach): launched alone it could not rejoin the others.
          ProposeLeave(commit.generation, StrCat("worker ", p_.worker, ": its attempt of generation ",
                                                 commit.generation, " ended with the tpud before"));
          WaitForGang(StrCat(what, "; this worker's attempt of it is gone: the gang restarts together"));
          return;
        }
        s_.generation = commit.generation;
        s_.restarts = commit.restarts;
        s_.restarts_by_reason = commit.restarts_by_reason;
        s_.resume_step = commit.step;
        BeginLaunch(StrCat(what, commit.step ? StrCat("; from step ", *commit.step) : "; from scratch"));
        return;
      case GangPhase::kStopped:
        if (s_.state == JobState::kStopped) return;
        fx_.push_back(CloseIncident{"stopped"});
        TransitionTo(JobState::kStopped, what);
        return;
      case GangPhase::kFailed:
        if (s_.state == JobState::kFailed) return;
        fx_.push_back(CloseIncident{StrCat("gave up: ", commit.reason)});
        TransitionTo(JobState::kFailed, what);
        return;
    }
  }

  Decision Membership(const MembershipChanged& e) {
    if (!p_.gang || s_.not_member == e.conflict) return Done();
    s_.not_member = e.conflict;
    if (e.conflict.empty()) {  // A member again: the gang's commits (delivered again) say what to do.
      if (s_.state == JobState::kBackoff && s_.wait == Wait::kGang) DelayLaunch("a member of the slice again");
      return Done();
    }
    switch (s_.state) {
      case JobState::kStarting:
      case JobState::kRunning:
        StopAttempt(NotMemberWhy(), StopIntent::kGang);
        break;
      case JobState::kStopping:
        if (s_.stop != StopIntent::kStop) s_.stop = StopIntent::kGang;
        break;
      case JobState::kBackoff:
        WaitForGang(NotMemberWhy());
        break;
      default:
        break;  // Nothing runs.
    }
    return Done();
  }

  std::string NotMemberWhy() const {
    return StrCat("not a member of the slice: ", s_.not_member, "; no attempt runs here until it is");
  }

  // Asks the gang to restart without counting it, this worker being away
  // (GangProposal::Intent::kLeave) from generation `base`.
  void ProposeLeave(std::int64_t base, std::string reason) {
    GangProposal proposal;
    proposal.intent = GangProposal::Intent::kLeave;
    proposal.base_generation = base;
    proposal.worker = p_.worker;
    proposal.reason = std::move(reason);
    proposal.restart = p_.restart;
    fx_.push_back(ProposeGeneration{proposal});
  }

  // BACKOFF, waiting for the gang, with `why`.
  void WaitForGang(const std::string& why) {
    DelayLaunch(why);
    s_.wait = Wait::kGang;
  }

  void Report() {
    if (s_.leaving || !s_.not_member.empty()) return;  // The next tpud (or this one, a member again) reports.
    s_.reported_generation = s_.gang->generation;
    fx_.push_back(ReportStopped{s_.gang->generation});
  }

 private:
  // Enters `next` (refused, with a log line, when the table does not allow
  // it); what belonged to the state left behind goes with it.
  void TransitionTo(JobState next, std::string reason, std::optional<ExitStatus> exit = {}) {
    if (!IsAllowedTransition(s_.state, next)) {
      fx_.push_back(Log{Log::kError, StrCat("job ", p_.job, ": refused transition ", JobStateName(s_.state), " -> ",
                                     JobStateName(next), " (", reason, ")")});
      return;
    }
    if (next != JobState::kStopping) {
      s_.stop = StopIntent::kNone;
      s_.stop_rung = -1;
    }
    if (next != JobState::kBackoff) {
      s_.wait = Wait::kNone;
      s_.reset_pending.reset();  // A reset belongs to the backoff that asked for it.
      s_.pending.reset();
    }
    const JobState from = s_.state;
    s_.state = next;
    s_.reason = reason;
    fx_.push_back(Transition{from, next, std::move(reason), std::move(exit)});
  }

  State s_;
  const Policy& p_;
  std::vector<Effect> fx_;
};

}  // namespace

bool State::wants_running() const {
  switch (state) {
    case JobState::kStarting:
    case JobState::kRunning:
    case JobState::kBackoff:
      return true;
    case JobState::kStopping:
      if (stop == StopIntent::kGang) {
        return gang && (gang->phase == GangPhase::kStopping || gang->phase == GangPhase::kStarting);
      }
      return stop == StopIntent::kHang || stop == StopIntent::kRestart;
    default:
      return false;
  }
}

Policy Policy::Of(const JobSpec& spec, bool preflight, bool can_reset) {
  Policy policy;
  policy.job = spec.name;
  policy.restart = spec.restart;
  policy.stop = spec.stop;
  policy.start_seconds = spec.start_seconds;
  policy.checkpoint_signal = spec.checkpoint_signal;
  policy.preflight = preflight;
  policy.can_reset = can_reset;
  policy.gang = spec.gang;
  return policy;
}

ExitStatus CheckpointLookupExit(const std::string& error) {
  ExitStatus exit;
  exit.spawn_error = StrCat("checkpoint lookup: ", error);
  return exit;
}

Classification NoticeClassification(const std::string& what) {
  Classification failure;
  failure.failure_class = FailureClass::kPreemption;
  failure.action = RecoveryAction::kWaitAndRestart;
  failure.rule = StrCat("metadata:", what);
  failure.hint =
      "the VM got a maintenance event or preemption notice; tpud sent the checkpoint signal and restarts the "
      "job when the event is over";
  return failure;
}

Decision Step(const State& state, const Event& event, const Policy& policy) {
  Decider d(state, policy);
  return std::visit(
      [&](const auto& e) -> Decision {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, StartRequested>) return d.Start(e.reason);
        if constexpr (std::is_same_v<E, StopRequested>) return d.Stop(e.reason);
        if constexpr (std::is_same_v<E, RestartRequested>) return d.Restart(e.reason);
        if constexpr (std::is_same_v<E, ShutdownRequested>) return d.Shutdown(e.reason);
        if constexpr (std::is_same_v<E, PreflightChecked>) return d.Preflight(e);
        if constexpr (std::is_same_v<E, AttemptPrepared>) return d.Prepared(e);
        if constexpr (std::is_same_v<E, Launched>) return d.LaunchResult(e);
        if constexpr (std::is_same_v<E, TimerFired>) return d.Timer(e);
        if constexpr (std::is_same_v<E, AttemptExited>) return d.Exited(e);
        if constexpr (std::is_same_v<E, HangDetected>) return d.Hang(e);
        if constexpr (std::is_same_v<E, MaintenanceNotice>) return d.Notice(e);
        if constexpr (std::is_same_v<E, MaintenanceOver>) return d.NoticeOver();
        if constexpr (std::is_same_v<E, ResetDone>) return d.ResetFinished(e);
        if constexpr (std::is_same_v<E, Resumed>) return d.Resume(e);
        if constexpr (std::is_same_v<E, GangCommitted>) return d.Gang(e);
        if constexpr (std::is_same_v<E, MembershipChanged>) return d.Membership(e);
      },
      event);
}

}  // namespace tpud::machine
