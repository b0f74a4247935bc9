// The job state machine, pure: (state, event) -> (next state, effects). No
// I/O, no clock, no callbacks, no randomness: what it needs of time (how long
// an attempt was up), of chance (the backoff jitter) and of the world (is a
// maintenance event in force) arrives in the event. The Job (job.h) performs
// the effects (launch, signal, arm a timer, reset the TPU, keep incidents,
// persist) and feeds what comes of them back in as events. This is the split
// app/reload.h (pure) and app/config_reloader.h (acting) make for reloads.
//
// States are JobState (job_state.h); what used to hide in flags is explicit:
//   stopping: why (StopIntent): a person's stop, a restart (start again when
//             the attempt is gone), or tpud stopping a hung attempt (restart
//             it as a failure); and the ladder's rung.
//   backoff:  what it waits for (Wait): a timer (restart, preflight or launch
//             retry), the end of a maintenance event, or a TPU reset (for a
//             failure, or for the preflight checks).
//   an attempt that got the checkpoint signal (a maintenance notice or
//             preemption, or lost while tpud was down): its exit is a
//             preemption, whatever its code.
//
// A gang job (spec `gang: true`, core/gang.h) decides nothing about restarts
// alone: a failure proposes the gang's next generation, and the worker then
// follows the generations the slice commits (GangCommitted): it stops an
// attempt the gang has moved past, reports its checkpoint steps once the
// attempt is gone, starts from the committed step, or ends stopped or failed
// with the gang. Requests (start, stop, restart) become proposals too.
// docs/architecture.md has the whole table; tests/unit/supervisor/
// job_machine_test.cc reads as that table.
//
// Thread-safety: pure functions of values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "daemon/core/clock.h"
#include "daemon/core/exit_status.h"
#include "daemon/core/failure_rule.h"
#include "daemon/core/gang.h"
#include "daemon/core/job_spec.h"
#include "daemon/supervisor/job_state.h"

namespace tpud::machine {

// kGang: the gang moved past this attempt's generation.
enum class StopIntent { kNone, kStop, kRestart, kHang, kGang };
// kGang: the gang's next commit; kGangReset: a local TPU reset before
// reporting to the gang.
enum class Wait { kNone, kTimer, kMaintenance, kFailureReset, kPreflightReset, kGang, kGangReset };
// What a timer is for; the Job feeds TimerFired with it when it goes off.
enum class TimerKind { kStartSeconds, kBackoff, kStopRung };

// The failure before the current one, for "the same failure at the same step
// twice in a row is deterministic".
struct PastFailure {
  int attempt = 0;
  FailureClass failure_class = FailureClass::kUnknown;
  std::string rule;
  std::optional<std::int64_t> step;
  bool operator==(const PastFailure&) const = default;
};

// A restart decided and not yet scheduled (waiting for a TPU reset).
struct PendingRestart {
  ExitStatus exit;
  Classification failure;
  bool counted = true;
  bool operator==(const PendingRestart&) const = default;
};

// Everything the decisions depend on. A value: copy it, compare it.
struct State {
  JobState state = JobState::kStopped;
  std::string reason;               // Why it is in `state`, one line.
  StopIntent stop = StopIntent::kNone;  // Meaningful in kStopping.
  int stop_rung = -1;               // kStopping: the last stop.signals index sent.
  Wait wait = Wait::kNone;          // Meaningful in kBackoff.
  std::string launch_reason;        // What the next launch will say (after a timer, a reset).
  bool attempt_alive = false;       // An attempt process exists (launched, not yet exited).
  bool notice_sent = false;         // The current attempt got the checkpoint signal...
  std::string notice_what;          // ...for this ("instance/preempted=TRUE").
  int attempt = 0;                  // Number of the newest attempt (1-based).
  std::int64_t attempts_total = 0;
  int restarts = 0;                 // Counted against max_restarts, since the last reset of the budget.
  int preflight_failures = 0;       // In a row.
  int launch_retries = 0;           // Transient launch failures in a row.
  std::optional<FailureClass> reset_pending;  // Wait::kFailureReset: the failure class it is for.
  std::optional<PendingRestart> pending;      // Wait::kFailureReset: the restart after it.
  std::uint64_t reset_generation = 0;         // Of the newest ResetTpu; an older ResetDone is stale.
  std::optional<PastFailure> last_failure;
  std::map<std::string, std::int64_t> restarts_by_reason;  // By failure class.
  std::map<std::string, std::int64_t> failures_by_class;
  // Gang jobs only.
  std::int64_t generation = 0;          // Of the newest attempt (its TPUD_GANG_GENERATION); 0: none.
  std::optional<GangCommit> gang;       // The newest commit seen.
  std::int64_t failed_generation = 0;   // A generation whose attempt failed here (proposed already).
  // tpud is shutting down with stop_jobs_on_exit: this worker left the gang
  // (ShutdownRequested) and neither reports nor launches again; its next
  // tpud does. Not persisted: it ends with this tpud.
  bool leaving = false;
  // Why this tpud is not a member of the slice (MembershipChanged); empty
  // while it is. Not persisted: the next tpud finds out again.
  std::string not_member;
  std::int64_t reported_generation = 0; // The newest kStopping generation reported to.
  // This worker's attempt ended in a maintenance event: it reports (so the
  // gang may restart) only once the event is over.
  bool maintenance_hold = false;
  std::optional<std::int64_t> resume_step;  // The committed step the next attempt resumes from.

  bool wants_running() const;  // The person's intent: starting, running, backoff, or stopping to restart.
  bool operator==(const State&) const = default;
};

// What the decisions depend on besides the state: the job's policies and
// what this tpud can do.
struct Policy {
  std::string job;          // The job's name, for messages.
  RestartPolicy restart;
  StopPolicy stop;
  double start_seconds = 1;
  int checkpoint_signal = 15;
  bool preflight = false;   // Checks run before each attempt.
  bool can_reset = false;   // A TPU reset backend is configured.
  // Gang jobs: this worker's id, and whether it resets its own TPU (the
  // local backend) before reporting a generation whose commit asks for one.
  bool gang = false;
  int worker = -1;
  bool gang_local_reset = false;
  static Policy Of(const JobSpec& spec, bool preflight, bool can_reset);
};

// --- Events ---------------------------------------------------------------
struct StartRequested { std::string reason; };
struct StopRequested { std::string reason; };
struct RestartRequested { std::string reason; };
// tpud is shutting down and stops its jobs (stop_jobs_on_exit). A job alone
// stops as for StopRequested. A gang worker leaves the gang for a while
// instead of stopping it for good: it stops its attempt, proposes a restart
// the gang does not count (GangProposal::Intent::kLeave), and neither reports
// its steps nor launches in this tpud; the gang waits for it, and its next
// tpud reports, so the gang restarts together.
struct ShutdownRequested { std::string reason; };
// The preflight checks' verdict (after a RunPreflight effect).
struct PreflightChecked {
  absl::Status status;                    // OK: go on.
  std::optional<FailureClass> reset_for;  // A reset that may fix it.
  double jitter = 0;                      // Uniform in [0, 1), for the backoff.
};
// The attempt was prepared (after PrepareAttempt): its number is taken.
// `checkpoint_error`: the checkpoint lookup failed (the attempt then fails).
struct AttemptPrepared {
  std::string checkpoint_error;
  Classification failure;  // With a checkpoint_error: how the failed attempt is classified.
};
// The launcher's answer (after Launch).
struct Launched {
  absl::Status status;   // Unavailable/ResourceExhausted: transient; other errors: permanent.
  double jitter = 0;
};
struct TimerFired {
  TimerKind kind;
  int rung = 0;                   // kStopRung: the rung that is due.
  bool maintenance_active = false;
};
// The attempt ended, classified (with the hang and the checkpoint signal
// taken into account: Job::ClassifyFailure).
struct AttemptExited {
  ExitStatus exit;
  Classification failure;
  Seconds uptime{0};                      // How long it ran.
  std::optional<std::int64_t> step;       // The last step it reported.
  bool maintenance_active = false;
  double jitter = 0;
};
struct HangDetected { std::string reason; };
struct MaintenanceNotice { std::string what; };
struct MaintenanceOver {};
// A TPU reset the machine asked for is done (after ResetTpu).
struct ResetDone {
  std::uint64_t generation = 0;  // ResetTpu's.
  bool attempted = false;
  std::string backend;
  Seconds duration{0};
  std::string result;   // "ok", or the error.
  double jitter = 0;
};
// Restored state carried on after a tpud restart (Job::Resume).
struct Resumed {
  bool adopted = false;                  // An attempt was re-attached...
  int adopted_attempt = 0;               // ...with this number (its shim's).
  std::optional<Seconds> start_left;     // kStarting, adopted: start_seconds not yet up.
  std::optional<Seconds> rung_due_in;    // kStopping, adopted: until the next rung.
  std::optional<Seconds> backoff_left;   // kBackoff with a timer: what was left of it.
  bool maintenance_active = false;
  double jitter = 0;
};
// A generation the slice committed (gang jobs), as every worker sees it.
// `maintenance_active`: this VM's maintenance event is on now (also after a
// tpud restart, which forgets a hold): a worker with no attempt holds its
// stop report until the event is over.
struct GangCommitted {
  GangCommit commit;
  bool maintenance_active = false;
};
// Gang jobs: this tpud is not a member of the slice (`conflict` says why,
// e.g. another live tpud holds its worker id), or is one again (empty).
// A tpud that is not a member runs no attempt of a gang: it stops the one it
// has (re-attached after a restart), launches none, and neither reports nor
// proposes, until it is a member again.
struct MembershipChanged { std::string conflict; };
using Event = std::variant<StartRequested, StopRequested, RestartRequested, ShutdownRequested, PreflightChecked, AttemptPrepared,
                           Launched, TimerFired, AttemptExited, HangDetected, MaintenanceNotice, MaintenanceOver,
                           ResetDone, Resumed, GangCommitted, MembershipChanged>;

// --- Effects --------------------------------------------------------------
// Enter `to` (the event the listener sees): cancels the state's timer.
struct Transition {
  JobState from;
  JobState to;
  std::string reason;
  std::optional<ExitStatus> exit;
};
// Stay in the state with a new reason; cancels the state's timer.
struct SetReason { std::string reason; };
struct RunPreflight {};
// Take the next attempt number, look up the checkpoint; feed AttemptPrepared.
// A gang's attempt resumes from the committed step exactly (`gang`: `step`,
// or from scratch without one), never from a newer checkpoint of its own.
struct PrepareAttempt {
  bool gang = false;
  std::optional<std::int64_t> step;
};
// Launch the prepared attempt; feed Launched.
struct Launch {};
struct Signal { int signal; };
struct ArmTimer {
  TimerKind kind;
  Seconds delay;
  int rung = 0;  // kStopRung: the rung it is for.
};
struct ResetTpu {
  FailureClass failure_class;
  std::uint64_t generation;  // Echo it in ResetDone.
};
// Open an incident for the failure (closing an open one as "failed again
// before the next attempt was up").
struct OpenIncident {
  ExitStatus exit;
  Classification failure;
  std::optional<std::int64_t> step;
};
struct IncidentCounted { bool counted; };
struct IncidentOutcome { std::string outcome; };
struct CloseIncident { std::string outcome; };
struct RecordReset { std::string backend; Seconds duration; std::string result; };
// Something a restarted tpud needs changed without a transition.
struct Persist {};
// Gang jobs: ask the slice for the next generation (not blocking; the
// answer is a GangCommitted).
struct ProposeGeneration { GangProposal proposal; };
// Gang jobs: this worker's attempt of an earlier generation is gone; tell
// the slice, with the steps of its complete checkpoints.
struct ReportStopped { std::int64_t generation; };
// A line for the daemon log (the machine itself never logs).
struct Log {
  enum Level { kInfo, kWarning, kError };
  Level level;
  std::string text;
};
using Effect = std::variant<Transition, SetReason, RunPreflight, PrepareAttempt, Launch, Signal, ArmTimer, ResetTpu,
                            OpenIncident, IncidentCounted, IncidentOutcome, CloseIncident, RecordReset, Persist, Log,
                            ProposeGeneration, ReportStopped>;

struct Decision {
  State next;
  std::vector<Effect> effects;
  absl::Status status;  // For requests: what the caller is told (FailedPrecondition: already active).
};

// The decision for `event` in `state` under `policy`. Pure.
Decision Step(const State& state, const Event& event, const Policy& policy);

// The exit of an attempt that never launched because the checkpoint lookup
// failed with `error`.
ExitStatus CheckpointLookupExit(const std::string& error);

// How an attempt that got the checkpoint signal (`what`: the notice, e.g.
// "instance/preempted=TRUE", or "attempt lost while tpud was down") is
// classified, whatever its exit: a preemption, not counted.
Classification NoticeClassification(const std::string& what);

}  // namespace tpud::machine
