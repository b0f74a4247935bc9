// The job machine as a table: each row is (state, event) -> (next state,
// effects), as docs/architecture.md lists it. Effects are compared as the
// one-line descriptions below, in order.
#include "daemon/supervisor/job_machine.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpud::machine {
namespace {

using absl::StrCat;

std::string Describe(const Effect& effect) {
  return std::visit(
      [](const auto& e) -> std::string {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, Transition>) return StrCat("-> ", JobStateName(e.to), ": ", e.reason);
        if constexpr (std::is_same_v<E, SetReason>) return StrCat("reason: ", e.reason);
        if constexpr (std::is_same_v<E, RunPreflight>) return "preflight";
        if constexpr (std::is_same_v<E, PrepareAttempt>) {
          if (!e.gang) return "prepare";
          return e.step ? StrCat("prepare from step ", *e.step) : std::string("prepare from scratch");
        }
        if constexpr (std::is_same_v<E, Launch>) return "launch";
        if constexpr (std::is_same_v<E, Signal>) return StrCat("signal ", e.signal);
        if constexpr (std::is_same_v<E, ArmTimer>) {
          const char* kind = e.kind == TimerKind::kStartSeconds ? "start"
                             : e.kind == TimerKind::kBackoff    ? "backoff"
                                                                : "rung";
          return StrCat("timer ", kind, " ", e.delay.count(), "s",
                        e.kind == TimerKind::kStopRung ? StrCat(" #", e.rung) : "");
        }
        if constexpr (std::is_same_v<E, ResetTpu>) {
          return StrCat("reset ", FailureClassName(e.failure_class), " gen ", e.generation);
        }
        if constexpr (std::is_same_v<E, OpenIncident>) {
          return StrCat("open incident ", FailureClassName(e.failure.failure_class));
        }
        if constexpr (std::is_same_v<E, IncidentCounted>) return e.counted ? "counted" : "not counted";
        if constexpr (std::is_same_v<E, IncidentOutcome>) return StrCat("outcome: ", e.outcome);
        if constexpr (std::is_same_v<E, CloseIncident>) return StrCat("close incident: ", e.outcome);
        if constexpr (std::is_same_v<E, RecordReset>) return StrCat("record reset ", e.backend, " ", e.result);
        if constexpr (std::is_same_v<E, Persist>) return "persist";
        if constexpr (std::is_same_v<E, Log>) return "log";
        if constexpr (std::is_same_v<E, ProposeGeneration>) {
          const GangProposal& p = e.proposal;
          const char* intent = p.intent == GangProposal::Intent::kStart   ? "start"
                               : p.intent == GangProposal::Intent::kStop  ? "stop"
                               : p.intent == GangProposal::Intent::kLeave ? "leave"
                                                                          : "restart";
          std::string out = StrCat("propose ", intent, " after ", p.base_generation, " by worker ", p.worker);
          if (p.failure) {
            absl::StrAppend(&out, " (", FailureClassName(p.failure->failure_class), ", ",
                      RecoveryActionName(p.failure->action), p.counted ? ", counted)" : ", not counted)");
          }
          return out;
        }
        if constexpr (std::is_same_v<E, ReportStopped>) return StrCat("report ", e.generation);
      },
      effect);
}

std::vector<std::string> Effects(const Decision& decision) {
  std::vector<std::string> out;
  for (const Effect& effect : decision.effects) out.push_back(Describe(effect));
  return out;
}

Policy TestPolicy(bool can_reset = false, bool preflight = false) {
  Policy policy;
  policy.job = "digits";
  policy.restart.max_restarts = 3;
  policy.restart.backoff_initial_seconds = 1;
  policy.restart.backoff_max_seconds = 5;
  policy.restart.reset_after_seconds = 100;
  policy.stop.grace_seconds = 10;
  policy.stop.signals = {SIGTERM, SIGKILL};
  policy.start_seconds = 2;
  policy.checkpoint_signal = SIGUSR1;
  policy.can_reset = can_reset;
  policy.preflight = preflight;
  return policy;
}

State In(JobState job_state) {
  State state;
  state.state = job_state;
  state.attempt = 1;
  state.attempts_total = 1;
  if (job_state == JobState::kStarting || job_state == JobState::kRunning || job_state == JobState::kStopping) {
    state.attempt_alive = true;
  }
  if (job_state == JobState::kStopping) {
    state.stop = StopIntent::kStop;
    state.stop_rung = 0;
  }
  if (job_state == JobState::kBackoff) state.wait = Wait::kTimer;
  return state;
}

State Stopping(StopIntent intent) {
  State state = In(JobState::kStopping);
  state.stop = intent;
  return state;
}

State Waiting(Wait wait) {
  State state = In(JobState::kBackoff);
  state.wait = wait;
  return state;
}

Classification Failure(FailureClass failure_class, RecoveryAction action, std::string rule = "builtin:x") {
  Classification failure;
  failure.failure_class = failure_class;
  failure.action = action;
  failure.rule = std::move(rule);
  return failure;
}

AttemptExited Exit(int code, Classification failure = Failure(FailureClass::kCrash, RecoveryAction::kRestart),
                   std::optional<std::int64_t> step = std::nullopt) {
  AttemptExited exited;
  exited.exit.code = code;
  exited.failure = std::move(failure);
  exited.uptime = Seconds(30);
  exited.step = step;
  return exited;
}

struct Row {
  std::string name;
  State state;
  Event event;
  std::vector<std::string> effects;
  // What must hold of the next state (and the decision's status).
  std::function<void(const State&)> then = [](const State&) {};
  Policy policy = TestPolicy();
};

void Check(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    DYNAMIC_SECTION(row.name) {
      const Decision decision = Step(row.state, row.event, row.policy);
      CHECK(Effects(decision) == row.effects);
      row.then(decision.next);
    }
  }
}

TEST_CASE("Job machine: requests", "[machine]") {
  Check({
      {"stopped + start: the attempt is prepared, with a fresh budget",
       In(JobState::kStopped),
       StartRequested{"start requested"},
       {"prepare"},
       [](const State& s) {
         CHECK(s.state == JobState::kStopped);  // STARTING once the attempt is prepared.
         CHECK(s.attempt == 2);
         CHECK(s.restarts == 0);
         CHECK(s.launch_reason == "start requested");
       }},
      {"stopped + start with preflight checks: they run first",
       In(JobState::kStopped),
       StartRequested{"go"},
       {"preflight"},
       [](const State& s) { CHECK(s.attempt == 1); },
       TestPolicy(false, true)},
      {"running + stop: the ladder's first rung, the next one armed",
       In(JobState::kRunning),
       StopRequested{"stop requested"},
       {"-> stopping: stop requested", "signal 15", "timer rung 10s #1", "persist"},
       [](const State& s) {
         CHECK(s.stop == StopIntent::kStop);
         CHECK(s.stop_rung == 0);
       }},
      {"backoff + stop: stopped at once, the open incident closed",
       In(JobState::kBackoff),
       StopRequested{"stop"},
       {"close incident: stopped", "-> stopped: stop"},
       [](const State& s) { CHECK(s.wait == Wait::kNone); }},
      {"stopping a hung attempt + stop: the person's stop wins, no restart",
       Stopping(StopIntent::kHang),
       StopRequested{"stop"},
       {},
       [](const State& s) { CHECK(s.stop == StopIntent::kStop); }},
      {"stopped + stop: nothing", In(JobState::kStopped), StopRequested{"stop"}, {}},
      {"running + restart: stop, then start again",
       In(JobState::kRunning),
       RestartRequested{"restart"},
       {"-> stopping: restart", "signal 15", "timer rung 10s #1", "persist"},
       [](const State& s) { CHECK(s.stop == StopIntent::kRestart); }},
      {"stopping a hung attempt + restart: the person's restart wins",
       Stopping(StopIntent::kHang),
       RestartRequested{"restart"},
       {},
       [](const State& s) { CHECK(s.stop == StopIntent::kRestart); }},
      {"backoff + restart: the next attempt now, with a fresh budget",
       [] {
         State s = In(JobState::kBackoff);
         s.restarts = 2;
         return s;
       }(),
       RestartRequested{"restart"},
       {"prepare"},
       [](const State& s) { CHECK(s.restarts == 0); }},
  });
}

TEST_CASE("Job machine: start while active is refused", "[machine]") {
  const Decision decision = Step(In(JobState::kRunning), StartRequested{"again"}, TestPolicy());
  CHECK(decision.status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(decision.status.message() == "job \"digits\" is already running");
  CHECK(decision.effects.empty());
  CHECK(decision.next == In(JobState::kRunning));
}

TEST_CASE("Job machine: launching", "[machine]") {
  State prepared = In(JobState::kStopped);
  prepared.launch_reason = "start requested";
  State launching = In(JobState::kStarting);  // Alive from the launch: a stop meanwhile signals it.
  launching.launch_retries = 2;
  Check({
      {"prepared: STARTING, then launch; alive from here", prepared, AttemptPrepared{},
       {"-> starting: start requested", "launch"}, [](const State& s) { CHECK(s.attempt_alive); }},
      {"a stop while the launcher starts it: the starting attempt is signalled",
       launching,
       StopRequested{"stop requested"},
       {"-> stopping: stop requested", "signal 15", "timer rung 10s #1", "persist"}},
      {"started after a stop: no start timer, the stop goes on",
       Stopping(StopIntent::kStop),
       Launched{},
       {},
       [](const State& s) {
         CHECK(s.state == JobState::kStopping);
         CHECK(s.attempt_alive);
       }},
      {"never started after a stop: STOPPED, nothing retried",
       Stopping(StopIntent::kStop),
       Launched{absl::NotFoundError("no such file")},
       {"close incident: stopped", "-> stopped: stopped (spawn failed: no such file)"},
       [](const State& s) { CHECK_FALSE(s.attempt_alive); }},
      {"never started after the gang moved on: the worker follows the gang",
       Stopping(StopIntent::kGang),
       Launched{absl::UnavailableError("fork: EAGAIN")},
       {"-> backoff: stopped for gang generation 0 (spawn failed: fork: EAGAIN)"},
       [](const State& s) {
         CHECK(s.wait == Wait::kGang);
         CHECK_FALSE(s.attempt_alive);
       }},
      {"prepared, the checkpoint lookup failed: the attempt fails",
       prepared,
       AttemptPrepared{"permission denied", Failure(FailureClass::kUnknown, RecoveryAction::kRestart)},
       {"-> starting: start requested", "open incident unknown", "outcome: restarting in 1.0s",
        "-> backoff: unknown: spawn failed: checkpoint lookup: permission denied; restart 1/3 in 1.0s",
        "timer backoff 1s", "persist"}},
      {"launched: start_seconds armed, retries reset",
       launching,
       Launched{},
       {"timer start 2s"},
       [](const State& s) {
         CHECK(s.attempt_alive);
         CHECK(s.launch_retries == 0);
       }},
      {"a transient launch failure: retried after a backoff, uncounted",
       launching,
       Launched{absl::UnavailableError("fork: EAGAIN")},
       {"log",
        "-> backoff: launch failed: fork: EAGAIN (transient; retry 3 in 4.0s, not counted against max_restarts)",
        "timer backoff 4s", "persist"},
       [](const State& s) {
         CHECK(s.wait == Wait::kTimer);
         CHECK(s.restarts == 0);
       }},
      {"a permanent launch failure: FAILED now",
       launching,
       Launched{absl::NotFoundError("no such file")},
       {"close incident: gave up: spawn failed: no such file", "-> failed: spawn failed: no such file"}},
      {"start_seconds up: RUNNING, the recovery done",
       In(JobState::kStarting),
       TimerFired{TimerKind::kStartSeconds},
       {"-> running: up for 2.0s", "close incident: restarted"}},
      {"start_seconds timer late, after a stop: nothing",
       In(JobState::kStopping),
       TimerFired{TimerKind::kStartSeconds},
       {}},
  });
}

TEST_CASE("Job machine: preflight", "[machine]") {
  State checking = In(JobState::kStopped);
  checking.launch_reason = "start";
  State failed_once = Waiting(Wait::kTimer);
  failed_once.preflight_failures = 1;
  Check({
      {"checks pass: the attempt is prepared",
       checking,
       PreflightChecked{},
       {"prepare"},
       [](const State& s) { CHECK(s.preflight_failures == 0); },
       TestPolicy(true, true)},
      {"first failure naming a reset: BACKOFF while the TPU is reset",
       checking,
       PreflightChecked{absl::UnavailableError("node state PREEMPTED"), FailureClass::kPreemption},
       {"-> backoff: preflight: node state PREEMPTED; resetting the TPU", "reset preemption gen 1"},
       [](const State& s) { CHECK(s.wait == Wait::kPreflightReset); },
       TestPolicy(true, true)},
      {"again after the reset: check again after a backoff",
       failed_once,
       PreflightChecked{absl::UnavailableError("node state PREEMPTED"), FailureClass::kPreemption},
       {"reason: preflight: node state PREEMPTED; checking again in 2.0s", "timer backoff 2s", "persist"},
       [](const State& s) { CHECK(s.preflight_failures == 2); },
       TestPolicy(true, true)},
      {"the reset done: check again",
       Waiting(Wait::kPreflightReset),
       ResetDone{0, true, "api", Seconds(60), "ok"},
       {"preflight"},
       [](const State&) {},
       TestPolicy(true, true)},
  });
}

TEST_CASE("Job machine: an attempt ends", "[machine]") {
  State hung = Stopping(StopIntent::kHang);
  State restart = Stopping(StopIntent::kRestart);
  restart.restarts = 2;
  State repeated = In(JobState::kRunning);
  repeated.attempt = 2;
  repeated.last_failure = PastFailure{1, FailureClass::kCrash, "builtin:x", 40};
  State spent = In(JobState::kRunning);
  spent.restarts = 3;
  State long_up = spent;
  AttemptExited after_hours = Exit(1);
  after_hours.uptime = Seconds(500);
  AttemptExited preempted = Exit(143, Failure(FailureClass::kPreemption, RecoveryAction::kWaitAndRestart));
  AttemptExited preempted_now = preempted;
  preempted_now.maintenance_active = true;
  Check({
      {"a stop's exit: STOPPED",
       In(JobState::kStopping),
       Exit(-1),
       {"close incident: stopped", "-> stopped: stopped (exit code -1)"}},
      {"a restart's exit: STOPPED, then the next attempt with a fresh budget",
       restart,
       Exit(0),
       {"close incident: stopped", "-> stopped: stopped (exit code 0)", "prepare"},
       [](const State& s) {
         CHECK(s.restarts == 0);
         CHECK(s.launch_reason == "restart requested");
       }},
      {"exit 0: SUCCEEDED",
       In(JobState::kRunning),
       Exit(0),
       {"close incident: restarted", "-> succeeded: exited 0 after 30.0s"}},
      {"a crash: a counted restart after the backoff",
       In(JobState::kRunning),
       Exit(1),
       {"open incident crash", "outcome: restarting in 1.0s", "-> backoff: crash: exit code 1; restart 1/3 in 1.0s",
        "timer backoff 1s", "persist"},
       [](const State& s) {
         CHECK(s.restarts == 1);
         CHECK(s.restarts_by_reason.at("crash") == 1);
         CHECK(s.failures_by_class.at("crash") == 1);
         CHECK(s.last_failure == PastFailure{1, FailureClass::kCrash, "builtin:x", std::nullopt});
       }},
      {"a hung attempt's exit: a failure, even with code 0",
       hung,
       Exit(0, Failure(FailureClass::kHang, RecoveryAction::kRestart, "hang")),
       {"open incident hang", "outcome: restarting in 1.0s", "-> backoff: hang: exit code 0; restart 1/3 in 1.0s",
        "timer backoff 1s", "persist"}},
      {"a deterministic failure: FAILED, no retry",
       In(JobState::kRunning),
       Exit(1, Failure(FailureClass::kHbmOom, RecoveryAction::kFail)),
       {"open incident hbm_oom", "close incident: gave up: hbm_oom: exit code 1 is not fixed by restarting",
        "-> failed: hbm_oom: exit code 1 is not fixed by restarting"}},
      {"the same failure at the same step as the attempt before: FAILED",
       repeated,
       Exit(1, Failure(FailureClass::kCrash, RecoveryAction::kRestart), 40),
       {"open incident crash",
        "close incident: gave up: crash: exit code 1 again at step 40: the same failure at the same step "
        "twice in a row is deterministic; not retrying",
        "-> failed: crash: exit code 1 again at step 40: the same failure at the same step twice in a row "
        "is deterministic; not retrying"}},
      {"the budget spent: FAILED",
       spent,
       Exit(1),
       {"open incident crash",
        "close incident: gave up: gave up after 3 restarts (max_restarts 3): crash: "
        "exit code 1",
        "-> failed: gave up after 3 restarts (max_restarts 3): crash: exit code 1"}},
      {"the budget spent, but up past reset_after_seconds: restarted",
       long_up,
       after_hours,
       {"open incident crash", "outcome: restarting in 1.0s", "-> backoff: crash: exit code 1; restart 1/3 in 1.0s",
        "timer backoff 1s", "persist"}},
      {"a preemption: restarted, not counted",
       In(JobState::kRunning),
       preempted,
       {"open incident preemption", "not counted", "outcome: restarting in 1.0s",
        "-> backoff: preemption: exit code 143; not counted against max_restarts in 1.0s", "timer backoff 1s",
        "persist"},
       [](const State& s) { CHECK(s.restarts == 0); }},
      {"a preemption during a maintenance event: wait for its end",
       In(JobState::kRunning),
       preempted_now,
       {"open incident preemption", "not counted", "outcome: waiting for the maintenance event to end",
        "-> backoff: preemption: exit code 143; waiting for the maintenance event to end (not counted "
        "against max_restarts)"},
       [](const State& s) { CHECK(s.wait == Wait::kMaintenance); }},
      {"an exit in BACKOFF (a stray report): ignored", In(JobState::kBackoff), Exit(1), {"log"}},
  });
}

TEST_CASE("Job machine: TPU resets", "[machine]") {
  AttemptExited deadline = Exit(1, Failure(FailureClass::kDeadlineExceeded, RecoveryAction::kResetAndRestart));
  State resetting = Waiting(Wait::kFailureReset);
  resetting.reset_generation = 4;
  resetting.reset_pending = FailureClass::kDeadlineExceeded;
  resetting.pending = PendingRestart{deadline.exit, deadline.failure, true};
  Check({
      {"a reset-class failure with a backend: BACKOFF while the TPU resets",
       In(JobState::kRunning),
       deadline,
       {"open incident deadline_exceeded", "outcome: resetting the TPU",
        "-> backoff: deadline_exceeded: exit code 1; resetting the TPU", "reset deadline_exceeded gen 1"},
       [](const State& s) {
         CHECK(s.wait == Wait::kFailureReset);
         CHECK(s.reset_pending == FailureClass::kDeadlineExceeded);
         CHECK(s.restarts == 0);  // Counted when the restart is scheduled.
       },
       TestPolicy(true)},
      {"without a backend: restarted, and it says so",
       In(JobState::kRunning),
       deadline,
       {"open incident deadline_exceeded", "outcome: restarting in 1.0s",
        "-> backoff: deadline_exceeded: exit code 1; restart 1/3; no TPU reset backend configured, "
        "restarting without a reset in 1.0s",
        "timer backoff 1s", "persist"}},
      {"the reset done: the restart scheduled, the reset recorded",
       resetting,
       ResetDone{4, true, "api", Seconds(90), "ok"},
       {"record reset api ok", "outcome: restarting in 1.0s",
        "reason: deadline_exceeded: exit code 1; restart 1/3; TPU reset (api) done in 1.0s", "timer backoff 1s",
        "persist"},
       [](const State& s) {
         CHECK(s.restarts == 1);
         CHECK(!s.reset_pending);
         CHECK(s.wait == Wait::kTimer);
       },
       TestPolicy(true)},
      {"a reset that finishes after the job moved on: ignored",
       resetting,
       ResetDone{3, true, "api", {}, "ok"},
       {},
       [](const State&) {},
       TestPolicy(true)},
  });
  SECTION("a failed reset is in the reason, and the restart goes ahead") {
    const Decision failed =
        Step(resetting, ResetDone{4, true, "gcloud", Seconds(90), "403 forbidden"}, TestPolicy(true));
    CHECK(failed.next.reason ==
          "deadline_exceeded: exit code 1; restart 1/3; TPU reset (gcloud) failed: 403 forbidden in 1.0s");
    CHECK(failed.next.wait == Wait::kTimer);
  }
}

TEST_CASE("Job machine: hangs and maintenance", "[machine]") {
  State noticed = In(JobState::kRunning);
  noticed.notice_sent = true;
  Check({
      {"a hang: STOPPING to restart it",
       In(JobState::kRunning),
       HangDetected{"hang: no progress for 60.0s"},
       {"-> stopping: hang: no progress for 60.0s", "signal 15", "timer rung 10s #1", "persist"},
       [](const State& s) {
         CHECK(s.stop == StopIntent::kHang);
         CHECK(s.wants_running());
       }},
      {"a hang reported after the attempt ended: nothing", In(JobState::kBackoff), HangDetected{"late"}, {}},
      {"a notice: the checkpoint signal, once",
       In(JobState::kRunning),
       MaintenanceNotice{"instance/preempted=TRUE"},
       {"log", "signal 10"},
       [](const State& s) {
         CHECK(s.notice_sent);
         CHECK(s.notice_what == "instance/preempted=TRUE");
       }},
      {"a second notice: nothing more", noticed, MaintenanceNotice{"again"}, {}},
      {"the event over: the waiting job starts", Waiting(Wait::kMaintenance), MaintenanceOver{}, {"prepare"}},
      {"the event over, a job waiting on a reset: it keeps waiting",
       Waiting(Wait::kFailureReset),
       MaintenanceOver{},
       {}},
      {"the backoff over during an event: wait for its end",
       Waiting(Wait::kTimer),
       TimerFired{TimerKind::kBackoff, 0, true},
       {},
       [](const State& s) { CHECK(s.wait == Wait::kMaintenance); }},
      {"the backoff over: the next attempt", Waiting(Wait::kTimer), TimerFired{TimerKind::kBackoff}, {"prepare"}},
      {"the next rung due: sent, the last one has no timer",
       In(JobState::kStopping),
       TimerFired{TimerKind::kStopRung, 1},
       {"signal 9", "persist"},
       [](const State& s) { CHECK(s.stop_rung == 1); }},
  });
}

TEST_CASE("Job machine: carrying on after a tpud restart", "[machine]") {
  State lost = In(JobState::kRunning);
  lost.attempt_alive = false;
  State stopping_lost = In(JobState::kStopping);
  stopping_lost.attempt_alive = false;
  State stopping = In(JobState::kStopping);
  stopping.attempt_alive = false;
  State backoff_reset = Waiting(Wait::kNone);
  backoff_reset.reset_pending = FailureClass::kDeadlineExceeded;
  backoff_reset.pending =
      PendingRestart{Exit(1).exit, Failure(FailureClass::kDeadlineExceeded, RecoveryAction::kResetAndRestart)};
  backoff_reset.reason = "resetting the TPU";
  backoff_reset.reset_generation = 7;
  Resumed adopted;
  adopted.adopted = true;
  adopted.adopted_attempt = 5;
  adopted.rung_due_in = Seconds(4);
  Resumed left;
  left.backoff_left = Seconds(3);
  Check({
      {"running, its attempt gone: a preemption, restarted uncounted",
       lost,
       Resumed{},
       {"open incident preemption", "not counted", "outcome: restarting in 1.0s",
        "-> backoff: preemption: spawn failed: the attempt was gone when tpud started (VM reboot or crash); not "
        "counted against max_restarts in 1.0s",
        "timer backoff 1s", "persist"}},
      {"stopping for a person, its attempt gone: STOPPED",
       stopping_lost,
       Resumed{},
       {"-> stopped: its attempt ended while tpud was down"}},
      {"stopping, re-attached: the ladder walks on at the time it was due",
       stopping,
       adopted,
       {"timer rung 4s #1"},
       [](const State& s) { CHECK(s.attempt == 5); }},
      {"a reset due and unfinished: redone first",
       backoff_reset,
       Resumed{},
       {"log", "reset deadline_exceeded gen 8"},
       [](const State& s) {
         CHECK(s.wait == Wait::kFailureReset);
         CHECK(s.reason == "resetting the TPU (reset redone after a tpud restart)");
       },
       TestPolicy(true)},
      {"backoff: what was left of the delay", Waiting(Wait::kNone), left, {"log", "timer backoff 3s", "persist"}},
      {"a record older than the re-attached attempt: it is up, silently",
       In(JobState::kBackoff),
       adopted,
       {"persist"},
       [](const State& s) { CHECK(s.state == JobState::kRunning); }},
  });
}

TEST_CASE("Job machine: wants_running is the person's intent", "[machine]") {
  CHECK(In(JobState::kRunning).wants_running());
  CHECK(In(JobState::kBackoff).wants_running());
  CHECK(Stopping(StopIntent::kRestart).wants_running());
  CHECK(Stopping(StopIntent::kHang).wants_running());
  CHECK_FALSE(Stopping(StopIntent::kStop).wants_running());
  CHECK_FALSE(In(JobState::kFailed).wants_running());
}


// --- Gangs: one job across every worker of a slice (core/gang.h) ---------

Policy GangPolicy(bool local_reset = false) {
  Policy policy = TestPolicy(local_reset);
  policy.gang = true;
  policy.worker = 1;
  policy.gang_local_reset = local_reset;
  return policy;
}

GangCommit Commit(std::int64_t generation, GangPhase phase, std::string reason = "worker 0: crash: exit code 1",
                  std::optional<std::int64_t> step = std::nullopt) {
  GangCommit commit;
  commit.generation = generation;
  commit.phase = phase;
  commit.reason = std::move(reason);
  commit.step = step;
  return commit;
}

// A worker of a gang whose generation 3 runs.
State GangIn(JobState job_state) {
  State state = In(job_state);
  state.generation = 3;
  state.gang = Commit(3, GangPhase::kStarting, "start requested", 40);
  if (job_state == JobState::kBackoff) state.wait = Wait::kGang;
  return state;
}

Row GangRow(std::string name, State state, Event event, std::vector<std::string> effects,
            std::function<void(const State&)> then = [](const State&) {}, bool local_reset = false) {
  return Row{std::move(name), std::move(state), std::move(event), std::move(effects), std::move(then),
             GangPolicy(local_reset)};
}

TEST_CASE("Job machine, gang: a failure here proposes the next generation and waits for the slice",
          "[machine][gang]") {
  State moved_on = GangIn(JobState::kRunning);
  moved_on.gang = Commit(4, GangPhase::kStopping);
  Check({
      GangRow("a crash: proposed, counted; the worker waits in BACKOFF", GangIn(JobState::kRunning), Exit(1),
              {"open incident crash", "propose restart after 3 by worker 1 (crash, restart, counted)",
               "outcome: the gang restarts together",
               "-> backoff: crash: exit code 1; stopping the gang, every worker restarts together"},
              [](const State& s) {
                CHECK(s.wait == Wait::kGang);
                CHECK(s.failed_generation == 3);
                CHECK(s.restarts == 0);  // The gang counts, at its commit.
              }),
      GangRow("a preemption: proposed, not counted", GangIn(JobState::kRunning),
              Exit(143, Failure(FailureClass::kPreemption, RecoveryAction::kWaitAndRestart)),
              {"open incident preemption", "not counted",
               "propose restart after 3 by worker 1 (preemption, wait_and_restart, not counted)",
               "outcome: the gang restarts together",
               "-> backoff: preemption: exit code 143; stopping the gang, every worker restarts together"}),
      GangRow("a deterministic failure: the slice decides, so it is proposed too", GangIn(JobState::kRunning),
              Exit(1, Failure(FailureClass::kHbmOom, RecoveryAction::kFail)),
              {"open incident hbm_oom", "propose restart after 3 by worker 1 (hbm_oom, fail, counted)",
               "outcome: the gang restarts together",
               "-> backoff: hbm_oom: exit code 1; stopping the gang, every worker restarts together"}),
      GangRow("a failure after the gang moved on: nothing to propose; report at once", moved_on, Exit(1),
              {"open incident crash", "outcome: the gang restarts together",
               "-> backoff: crash: exit code 1; stopping the gang, every worker restarts together",
               "reason: gang generation 4: worker 0: crash: exit code 1; waiting for every worker to stop",
               "report 4"}),
  });
}

TEST_CASE("Job machine, gang: the worker follows the generations the slice commits", "[machine][gang]") {
  State stopping = GangIn(JobState::kStopping);
  stopping.stop = StopIntent::kGang;
  stopping.gang = Commit(4, GangPhase::kStopping);
  State reported = GangIn(JobState::kBackoff);
  reported.gang = Commit(4, GangPhase::kStopping);
  reported.reported_generation = 4;
  State stopped = In(JobState::kStopped);
  stopped.attempt_alive = false;
  State stopping_for_stop = stopping;
  stopping_for_stop.gang = Commit(4, GangPhase::kStopped, "stop requested");
  State failed_here = GangIn(JobState::kBackoff);
  failed_here.failed_generation = 3;
  Check({
      GangRow("a newer generation: the running attempt is stopped", GangIn(JobState::kRunning),
              GangCommitted{Commit(4, GangPhase::kStopping)},
              {"-> stopping: gang generation 4: worker 0: crash: exit code 1", "signal 15", "timer rung 10s #1",
               "persist"},
              [](const State& s) {
                CHECK(s.stop == StopIntent::kGang);
                CHECK(s.wants_running());
              }),
      GangRow("the stopped attempt's exit: BACKOFF, and the steps reported", stopping, Exit(143),
              {"-> backoff: stopped for gang generation 4 (exit code 143)",
               "reason: gang generation 4: worker 0: crash: exit code 1; waiting for every worker to stop",
               "report 4"},
              [](const State& s) { CHECK(s.reported_generation == 4); }),
      GangRow("starting committed: the attempt resumes from the common step, with the gang's budget", reported,
              GangCommitted{[] {
                GangCommit c = Commit(4, GangPhase::kStarting, "worker 0: crash: exit code 1", 40);
                c.restarts = 2;
                c.restarts_by_reason = {{"crash", 2}};
                return c;
              }()},
              {"prepare from step 40"},
              [](const State& s) {
                CHECK(s.generation == 4);
                CHECK(s.restarts == 2);
                CHECK(s.restarts_by_reason.at("crash") == 2);
                CHECK(s.launch_reason == "gang generation 4: worker 0: crash: exit code 1; from step 40");
              }),
      GangRow("starting with no common step: from scratch, whatever this worker holds", reported,
              GangCommitted{Commit(4, GangPhase::kStarting)}, {"prepare from scratch"}),
      GangRow("a gang started from stopped: report, then wait", stopped,
              GangCommitted{Commit(1, GangPhase::kStopping, "start requested")},
              {"-> backoff: gang generation 1: start requested; waiting for every worker to stop", "report 1"}),
      GangRow("the gang failed: FAILED here too", GangIn(JobState::kBackoff),
              GangCommitted{Commit(5, GangPhase::kFailed, "hbm_oom: exit code 1 is not fixed by restarting")},
              {"close incident: gave up: hbm_oom: exit code 1 is not fixed by restarting",
               "-> failed: gang generation 5: hbm_oom: exit code 1 is not fixed by restarting"}),
      GangRow("the gang stopped by a person: the attempt stops, then STOPPED", stopping_for_stop, Exit(143),
              {"-> backoff: stopped for gang generation 4 (exit code 143)", "close incident: stopped",
               "-> stopped: gang generation 4: stop requested"},
              [](const State& s) { CHECK_FALSE(s.wants_running()); }),
      GangRow("an older commit arriving late: ignored", reported, GangCommitted{Commit(3, GangPhase::kStarting)},
              {}),
      GangRow("the commit of a generation that failed here, seen again: no lone relaunch", failed_here,
              GangCommitted{Commit(3, GangPhase::kStarting, "again", 40)}, {}),
      GangRow("a generation this attempt belongs to: it runs on", GangIn(JobState::kRunning),
              GangCommitted{Commit(3, GangPhase::kStarting, "restated", 40)}, {}),
  });
}

TEST_CASE("Job machine, gang: a worker in a maintenance event reports only once it is over", "[machine][gang]") {
  AttemptExited preempted = Exit(143, Failure(FailureClass::kPreemption, RecoveryAction::kWaitAndRestart));
  preempted.maintenance_active = true;
  const Decision exited = Step(GangIn(JobState::kRunning), preempted, GangPolicy());
  CHECK(exited.next.maintenance_hold);
  // The slice commits the next generation: this worker holds its report.
  const Decision committed =
      Step(exited.next, GangCommitted{Commit(4, GangPhase::kStopping, "worker 1: preemption: exit code 143")},
           GangPolicy());
  CHECK(Effects(committed) ==
        std::vector<std::string>{"reason: gang generation 4: worker 1: preemption: exit code 143; waiting for this "
                                 "worker's maintenance event to end"});
  CHECK(committed.next.wait == Wait::kMaintenance);
  CHECK(committed.next.reported_generation == 0);
  // The event is over: it reports, and the gang can start.
  const Decision over = Step(committed.next, MaintenanceOver{}, GangPolicy());
  CHECK(Effects(over).back() == "report 4");
  CHECK_FALSE(over.next.maintenance_hold);
  CHECK(over.next.wait == Wait::kGang);
}

TEST_CASE("Job machine, gang: after a tpud restart, a maintenance event still on holds the report", "[machine][gang]") {
  // Restored with no attempt: the hold it had is forgotten, but the event is on.
  State restored = GangIn(JobState::kBackoff);
  restored.attempt_alive = false;
  const Decision committed =
      Step(restored, GangCommitted{Commit(4, GangPhase::kStopping, "worker 1: preemption: exit code 143"), true},
           GangPolicy());
  CHECK(committed.next.maintenance_hold);
  CHECK(committed.next.wait == Wait::kMaintenance);
  CHECK(committed.next.reported_generation == 0);
  CHECK(Effects(Step(committed.next, MaintenanceOver{}, GangPolicy())).back() == "report 4");
  // No event on: it reports at once.
  CHECK(Effects(Step(restored, GangCommitted{Commit(4, GangPhase::kStopping, "x"), false}, GangPolicy())).back() ==
        "report 4");
}

TEST_CASE("Job machine, gang: a local reset backend resets each worker before it reports", "[machine][gang]") {
  State idle = GangIn(JobState::kBackoff);
  GangCommit commit = Commit(4, GangPhase::kStopping, "worker 0: deadline_exceeded: exit code 1");
  commit.reset_class = FailureClass::kDeadlineExceeded;
  const Decision reset = Step(idle, GangCommitted{commit}, GangPolicy(/*local_reset=*/true));
  CHECK(Effects(reset) ==
        std::vector<std::string>{
            "reason: gang generation 4: worker 0: deadline_exceeded: exit code 1; waiting for every worker to stop",
            "reset deadline_exceeded gen 1"});
  CHECK(reset.next.wait == Wait::kGangReset);
  const Decision done = Step(reset.next, ResetDone{1, true, "local", Seconds(2), "ok"}, GangPolicy(true));
  CHECK(Effects(done) == std::vector<std::string>{"report 4"});
  // Without a local backend the leader resets the slice: the worker reports at once.
  CHECK(Effects(Step(idle, GangCommitted{commit}, GangPolicy(false))).back() == "report 4");
}

TEST_CASE("Job machine, gang: requests are proposals to the slice", "[machine][gang]") {
  State stopped = In(JobState::kStopped);
  stopped.attempt_alive = false;
  Check({
      GangRow("start: proposed", stopped, StartRequested{"start requested"},
              {"propose start after 0 by worker 1"}),
      GangRow("stop of a running gang: stopped here at once (etcd or not), and proposed for the others",
              GangIn(JobState::kRunning), StopRequested{"stop requested"},
              {"-> stopping: stop requested", "signal 15", "timer rung 10s #1", "persist",
               "propose stop after 3 by worker 1"},
              [](const State& s) { CHECK(s.stop == StopIntent::kStop); }),
      GangRow("the stopped commit arriving while the stop runs: still a person's stop", [] {
                State stopping = GangIn(JobState::kStopping);
                stopping.stop = StopIntent::kStop;
                return stopping;
              }(),
              GangCommitted{Commit(4, GangPhase::kStopped, "stop requested")}, {},
              [](const State& s) { CHECK(s.stop == StopIntent::kStop); }),
      GangRow("restart: proposed", GangIn(JobState::kRunning), RestartRequested{"restart requested"},
              {"propose restart after 3 by worker 1"}),
      GangRow("stop of a stopped gang: nothing", stopped, StopRequested{"stop"}, {}),
  });
  const Decision again = Step(GangIn(JobState::kRunning), StartRequested{"again"}, GangPolicy());
  CHECK(again.status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(again.status.message() == "job \"digits\" is already active as a gang (generation 3: starting)");
}

TEST_CASE("Job machine, gang: tpud shutting down with stop_jobs_on_exit leaves the gang, never stops it",
          "[machine][gang]") {
  State stopping_gang = GangIn(JobState::kBackoff);
  stopping_gang.gang = Commit(4, GangPhase::kStopping);
  Check({
      GangRow("running: the attempt stops, and the gang is asked to restart without this worker's vote",
              GangIn(JobState::kRunning), ShutdownRequested{"tpud received SIGTERM"},
              {"propose leave after 3 by worker 1",
               "-> stopping: tpud received SIGTERM: leaving the gang until tpud is back", "signal 15",
               "timer rung 10s #1", "persist"},
              [](const State& s) {
                CHECK(s.leaving);
                CHECK(s.stop == StopIntent::kGang);
                CHECK(s.wants_running());  // The next tpud follows the gang.
              }),
      GangRow("waiting for the gang, which is stopping, not yet reported: no proposal, it waits on", stopping_gang,
              ShutdownRequested{"tpud received SIGTERM"},
              {"reason: tpud received SIGTERM: leaving the gang until tpud is back", "persist"},
              [](const State& s) { CHECK(s.wait == Wait::kGang); }),
      GangRow("already reported to a stopping gang: asked again, so the leader cannot start without it",
              [&] {
                State reported = stopping_gang;
                reported.reported_generation = 4;
                return reported;
              }(),
              ShutdownRequested{"tpud received SIGTERM"},
              {"propose leave after 4 by worker 1",
               "reason: tpud received SIGTERM: leaving the gang until tpud is back", "persist"}),
      GangRow("a hang being stopped: no leave (it fails the gang, counted, when it exits)",
              [] {
                State hung = GangIn(JobState::kStopping);
                hung.stop = StopIntent::kHang;
                return hung;
              }(),
              ShutdownRequested{"tpud received SIGTERM"}, {}),
      GangRow("done here (succeeded): nothing to leave, the gang is not restarted", [] {
                State done = GangIn(JobState::kSucceeded);
                done.attempt_alive = false;
                return done;
              }(),
              ShutdownRequested{"tpud received SIGTERM"}, {}, [](const State& s) { CHECK_FALSE(s.leaving); }),
      GangRow("the next tpud finds the gang still running the generation its attempt left: no lone launch",
              [] {
                State restored = GangIn(JobState::kBackoff);
                restored.attempt_alive = false;
                restored.gang.reset();
                return restored;
              }(),
              GangCommitted{Commit(3, GangPhase::kStarting, "start requested", 40)},
              {"propose leave after 3 by worker 1",
               "reason: gang generation 3: start requested; this worker's attempt of it is gone: the gang restarts "
               "together"}),
      Row{"a job alone stops as for a person", In(JobState::kRunning), ShutdownRequested{"tpud received SIGTERM"},
          {"-> stopping: tpud received SIGTERM", "signal 15", "timer rung 10s #1", "persist"},
          [](const State& s) {
            CHECK(s.stop == StopIntent::kStop);
            CHECK_FALSE(s.leaving);
          }},
  });
  // The attempt exits while the gang stops: BACKOFF, but no report (the
  // gang must wait for this worker, not start without it) and no launch.
  const Decision left = Step(GangIn(JobState::kRunning), ShutdownRequested{"tpud received SIGTERM"}, GangPolicy());
  State exiting = left.next;
  const Decision committed =
      Step(exiting, GangCommitted{Commit(4, GangPhase::kStopping, "worker 1 left: tpud received SIGTERM")},
           GangPolicy());
  const Decision exited = Step(committed.next, Exit(143), GangPolicy());
  CHECK(exited.next.state == JobState::kBackoff);
  CHECK(exited.next.wait == Wait::kGang);
  CHECK(exited.next.reported_generation == 0);
  for (const std::string& effect : Effects(exited)) CHECK(effect.find("report") == std::string::npos);
  const Decision started =
      Step(exited.next, GangCommitted{Commit(4, GangPhase::kStarting, "x", 40)}, GangPolicy());
  for (const std::string& effect : Effects(started)) CHECK(effect.find("prepare") == std::string::npos);
  CHECK(started.next.state == JobState::kBackoff);
  // The next tpud (leaving is not restored) reports the generation.
  State restored = exited.next;
  restored.leaving = false;
  CHECK(Effects(Step(restored, GangCommitted{Commit(5, GangPhase::kStopping, "y")}, GangPolicy())).back() ==
        "report 5");
}

TEST_CASE("Job machine, gang: a tpud that is not a member of the slice runs no attempt, and says why",
          "[machine][gang]") {
  const std::string conflict = "worker 1 is already held by the tpud on h (pid 7)";
  const std::string why = "not a member of the slice: " + conflict + "; no attempt runs here until it is";
  State not_member = GangIn(JobState::kBackoff);
  not_member.not_member = conflict;
  State stopping_not_member = GangIn(JobState::kStopping);
  stopping_not_member.stop = StopIntent::kGang;
  stopping_not_member.not_member = conflict;
  Check({
      GangRow("running (re-attached after a restart): the attempt is stopped, nothing is proposed",
              GangIn(JobState::kRunning), MembershipChanged{conflict},
              {"-> stopping: " + why, "signal 15", "timer rung 10s #1", "persist"},
              [&](const State& s) {
                CHECK(s.stop == StopIntent::kGang);
                CHECK(s.not_member == conflict);
              }),
      GangRow("its attempt exits: it waits, neither reporting nor proposing", stopping_not_member, Exit(143),
              {"-> backoff: stopped for gang generation 3 (exit code 143)", "reason: " + why},
              [](const State& s) { CHECK(s.wait == Wait::kGang); }),
      GangRow("a stopping commit while not a member: no report", not_member,
              GangCommitted{Commit(4, GangPhase::kStopping)}, {"reason: " + why}),
      GangRow("a starting commit while not a member: no launch", not_member,
              GangCommitted{Commit(4, GangPhase::kStarting, "worker 0: crash", 40)}, {"reason: " + why}),
      GangRow("a member again: it waits for the gang's commit, delivered again", not_member, MembershipChanged{""},
              {"reason: a member of the slice again"}, [](const State& s) { CHECK(s.not_member.empty()); }),
      Row{"a job alone ignores it", In(JobState::kRunning), MembershipChanged{conflict}, {}},
  });
}

TEST_CASE("Job machine, gang: a launch that cannot work fails the gang through the slice", "[machine][gang]") {
  State launching = GangIn(JobState::kStarting);
  launching.attempt_alive = false;
  const Decision d = Step(launching, Launched{absl::NotFoundError("no such file")}, GangPolicy());
  CHECK(Effects(d) == std::vector<std::string>{
                          "open incident unknown", "propose restart after 3 by worker 1 (unknown, fail, counted)",
                          "outcome: the gang restarts together",
                          "-> backoff: unknown: spawn failed: no such file; stopping the gang, every worker "
                          "restarts together"});
}

}  // namespace
}  // namespace tpud::machine
