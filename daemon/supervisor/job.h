// One supervised job: its spec, its state machine, and its current attempt.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/classify/classifier.h"
#include "daemon/core/clock.h"
#include "daemon/config/config.h"
#include "daemon/incident/bundle.h"
#include "daemon/launch/launcher.h"
#include "daemon/supervisor/goodput.h"
#include "daemon/supervisor/incident.h"
#include "daemon/supervisor/job_machine.h"
#include "daemon/supervisor/job_state.h"
#include "daemon/supervisor/progress.h"
#include "daemon/tpu/reset_request.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace tpud {

// One state change. Every transition emits exactly one, from one place
// (Job::TransitionTo), feeding logs, metrics and the event stream alike.
struct JobEvent {
  std::int64_t sequence = 0;      // Set by the receiver that numbers events.
  WallTime time;
  std::string job;
  JobState from = JobState::kStopped;
  JobState to = JobState::kStopped;
  std::string reason;
  int attempt = 0;
  std::optional<ExitStatus> exit;            // When an attempt's end caused it.
  std::optional<CheckpointRef> checkpoint;   // On entering STARTING: what it resumes from.
};

// What a job looks like right now (what `tpuctl status` shows).
struct JobSnapshot {
  std::string name;
  JobState state = JobState::kStopped;
  std::string reason;
  WallTime state_since;
  int pid = 0;
  int attempt = 0;
  int restarts = 0;
  std::optional<ExitStatus> last_exit;
  std::optional<CheckpointRef> checkpoint;
  Seconds uptime{0};
  Seconds backoff_remaining{0};
  std::int64_t attempts_total = 0;
  std::map<std::string, std::int64_t> restarts_by_reason;  // By failure class: "crash", "hang", ...
  std::map<std::string, std::int64_t> failures_by_class;   // Every failed attempt, restarted or not.
  std::optional<Incident> last_incident;                  // The newest one, open or closed.
  std::optional<std::int64_t> last_step;                   // From the progress regex, this attempt.
  GoodputFigures goodput;  // Since tpud started watching the job (supervisor/goodput.h).
  std::filesystem::path log_path;
  JobSpec spec;
  // Output the job log could not write (a full disk), over all attempts, and
  // whether it is dropping output right now.
  std::uint64_t log_dropped_bytes = 0;
  bool log_dropping = false;
  // Where the job is within its state, for a restarted tpud (JobMemory).
  std::optional<WallTime> attempt_started;   // The current attempt's start.
  std::optional<WallTime> backoff_until;     // Backoff with a timer: when the next attempt is due.
  int stop_rung = -1;                        // Stopping: the last stop.signals index sent.
  std::optional<WallTime> stop_next_rung;    // Stopping: when the next signal is due...
  Seconds stop_next_rung_in{0};              // ...and how long until then.
  std::string stop_intent;                   // Stopping: "stop", "restart" or "hang".
  std::optional<FailureClass> reset_pending; // A TPU reset asked for and not finished.
  // Gang jobs: the generation of the newest attempt, the gang's newest
  // commit seen, and a generation whose attempt failed here.
  std::int64_t gang_generation = 0;
  std::optional<GangCommit> gang;
  std::int64_t gang_failed_generation = 0;
};

// What an earlier tpud knew of a job (Job::Restore): its state and counters,
// and where within its state it was, so the job carries on from there.
struct JobMemory {
  JobState state = JobState::kStopped;
  std::string reason;
  WallTime state_since;
  int attempt = 0;
  int restarts = 0;
  std::int64_t attempts_total = 0;
  std::map<std::string, std::int64_t> restarts_by_reason;
  std::optional<ExitStatus> last_exit;
  std::deque<Incident> incidents;  // Oldest first.
  std::optional<WallTime> attempt_started;
  std::optional<WallTime> backoff_until;
  int stop_rung = -1;
  std::optional<WallTime> stop_next_rung;
  std::string stop_intent;
  std::optional<FailureClass> reset_pending;
  std::uint64_t log_dropped_bytes = 0;
  std::int64_t gang_generation = 0;
  std::int64_t gang_failed_generation = 0;
};

// Receives what jobs report. Called on the event loop thread.
class JobListener {
 public:
  virtual ~JobListener() = default;
  virtual void OnJobEvent(const JobEvent& event) = 0;
  // A block of the attempt's output: whole lines, each ending in '\n'.
  virtual void OnJobOutputLines(const std::string& job, std::string_view lines) = 0;
  // An incident opened, or changed (closed, checkpoint step learned).
  virtual void OnIncident(const Incident& incident) {}
  // Something a restarted tpud needs changed without a state change (a stop
  // signal sent, a TPU reset finished, a new backoff deadline).
  virtual void OnJobUpdated(const std::string& job) {}
};

// What a Job needs from the outside; all must outlive the Job.
struct JobDeps {
  Clock* clock = nullptr;
  Launcher* launcher = nullptr;
  JobListener* listener = nullptr;
  // Finds the checkpoint to resume from; FindNewestCheckpoint in production.
  std::function<absl::StatusOr<std::optional<CheckpointRef>>(const CheckpointSpec&)> find_checkpoint;
  // Gang jobs: the complete checkpoint of a step (FindCheckpointAtStep), and
  // the steps of every complete checkpoint, ascending (ListCompleteSteps).
  std::function<absl::StatusOr<std::optional<CheckpointRef>>(const CheckpointSpec&, std::int64_t step)>
      find_checkpoint_at_step;
  std::function<absl::StatusOr<std::vector<std::int64_t>>(const CheckpointSpec&)> list_checkpoint_steps;
  // Gang jobs: the slice, this worker's id and the slice's size. Null gang:
  // the job runs alone whatever its spec says.
  GangLink* gang = nullptr;
  int worker_id = -1;
  int num_workers = 0;
  // Gang jobs: whether the TPU reset backend is per worker (local), so each
  // worker resets before reporting instead of the leader resetting the slice.
  bool reset_is_local = false;
  // Uniform in [0, 1), for backoff jitter.
  std::function<double()> random;
  std::filesystem::path log_dir;              // The job logs to log_dir/NAME.log.
  std::filesystem::path default_working_dir;  // When the spec has none.
  // Calls `on_change` (on the loop) when the file's mtime advances, until the
  // returned handle is destroyed. Null: heartbeat files are not watched.
  std::function<std::shared_ptr<void>(const std::filesystem::path&, std::function<void()>)> watch_file;
  // Whether a maintenance event or preemption notice is in force. Null: never.
  std::function<bool()> maintenance_active;
  // Resets the TPU off the loop and calls `done` back on the loop. Null: no
  // reset backend; reset_and_restart then just restarts.
  std::function<void(const TpuResetRequest&, std::function<void(TpuResetResult)> done)> reset_tpu;
  // Who attempts run as, from the spec's user and group (launch/run_as.h
  // ResolveRunAs in production). Null: as tpud, whatever the spec says.
  std::function<absl::StatusOr<std::optional<RunAs>>(const std::string& user, const std::string& group)>
      resolve_run_as;
  // Checks that the TPU is usable right before each attempt. A failing
  // verdict puts the job in BACKOFF with the reason instead of launching (not
  // counted against max_restarts): after a TPU reset when the verdict names
  // one and reset_tpu is set (first failure in a row only), else after the
  // restart backoff delay; then the checks run again. Called on the loop; must
  // not block on the network. Null: no checks.
  std::function<PreflightVerdict(const JobSpec&)> preflight;
  // Saves an incident bundle (incident/bundle.h) off the loop and calls
  // `done` back on the loop once it is written or has failed. Called when a
  // hang is declared, before the first stop signal (which waits for `done`,
  // or capture_seconds, whichever comes first), and when a failed
  // attempt opens an incident (not for preemptions, maintenance events or
  // spawn failures). Null: no bundles.
  std::function<void(incident::CaptureRequest, std::function<void()> done)> capture_incident;
  Seconds capture_seconds{10};
};

// The decisions are the pure machine's (job_machine.h); a Job performs its
// effects (launches, signals, timers, TPU resets, incidents, persistence)
// and feeds back what comes of them, and it watches the attempt (output,
// progress, hangs) to tell the machine what happened.
//
// Thread-safety: not thread-safe; every call, and every callback it receives
// (timers, attempt output and exit), happens on the supervisor's loop thread.
class Job final : public AttemptObserver {
 public:
  Job(JobSpec spec, JobDeps deps);
  ~Job() override;

  // STOPPED/SUCCEEDED/FAILED -> STARTING and launches an attempt with a fresh
  // restart budget. FailedPrecondition when the job is already active.
  absl::Status Start(const std::string& reason);
  // Walks the stop ladder (STOPPING) or, in BACKOFF, goes straight to
  // STOPPED. FailedPrecondition when the job is not active.
  absl::Status Stop(const std::string& reason);
  // Stops if active, then starts again with a fresh restart budget.
  absl::Status Restart(const std::string& reason);
  // tpud is shutting down and stops its jobs (stop_jobs_on_exit): as Stop
  // for a job alone; a gang worker leaves the gang until the next tpud
  // instead of stopping it (machine::ShutdownRequested). Settled once
  // stopped_for_shutdown() holds.
  void StopForShutdown(const std::string& reason);
  // Inactive, or a gang worker with no attempt left, waiting for the next
  // tpud to follow the gang.
  bool stopped_for_shutdown() const;
  // Replaces the spec; it applies from the next attempt on.
  void UpdateSpec(JobSpec spec);
  // A maintenance event or preemption notice (`what`, e.g. "maintenance-event
  // TERMINATE_ON_HOST_MAINTENANCE"): sends checkpoint_signal to a live attempt
  // so it can save; its exit then counts as a preemption, not a failure.
  void OnMaintenanceNotice(const std::string& what);
  // The notice is over: a job waiting for it starts its next attempt.
  void OnMaintenanceOver();
  // Gang jobs: a generation the slice committed (core/gang.h).
  void OnGangCommitted(const GangCommit& commit);
  // Gang jobs: whether this tpud is a member of the slice (machine::MembershipChanged).
  void OnSliceMembership(const std::string& conflict);

  // What an earlier tpud knew. Emits no event: nothing changed, tpud only
  // remembers. Call before Resume.
  void Restore(JobMemory memory);
  // The same, for what a tpud before schema version 2 stored.
  void Restore(JobState state, const std::string& reason, WallTime state_since, int attempt,
               int restarts, std::int64_t attempts_total, std::map<std::string, std::int64_t> by_reason,
               std::optional<ExitStatus> last_exit, std::deque<Incident> incidents);
  // Carries on after Restore, from where the job was. `adopted` is the
  // attempt re-attached through its shim (null when there was none): it runs
  // on, starting keeps what is left of start_seconds, and stopping walks on
  // from the rung it had reached, at the time it was due. A job that was
  // starting, running or stopping with no attempt left lost it while tpud
  // was down (a reboot): that is an incident, and the job restarts from its
  // checkpoint. A job in backoff waits out what was left of its delay; one
  // whose TPU reset was due and unfinished resets again first (an unreset TPU
  // is never restarted on because tpud happened to restart); one waiting for
  // a maintenance event waits on.
  void Resume(std::unique_ptr<Attempt> adopted, int adopted_attempt);
  // The person's intent: true while the job should be running.
  bool wants_running() const;

  JobSnapshot Snapshot() const;
  JobState state() const { return machine_.state; }
  const std::deque<Incident>& incidents() const { return incidents_; }
  std::deque<Incident>& mutable_incidents() { return incidents_; }
  const JobSpec& spec() const { return spec_; }

  // AttemptObserver.
  void OnOutputLine(std::string_view line) override;
  void OnOutputLines(std::string_view lines) override;
  void OnLogDropped(std::uint64_t dropped_bytes, bool dropping) override;
  void OnExit(const ExitStatus& status) override;
  void OnStarted(const absl::Status& status) override;

 private:
  // Runs `event` through the machine, and every event its effects produce,
  // until none is left; returns the first decision's status. Re-entrant
  // calls (a callback that feeds while effects are performed) queue.
  absl::Status Feed(machine::Event event);
  // Feed for what is not a request: the machine answers only requests with a
  // status, so there is none to report.
  void Deliver(machine::Event event);
  // A result of an effect being performed: decided right after the current
  // decision, before anything fed from outside meanwhile.
  void FeedResult(machine::Event event);
  // The launched attempt's trainer runs (its pid known): watched from now on.
  void AttemptRunning();
  void Perform(const machine::Effect& effect);
  void PerformTransition(const machine::Transition& transition);
  void PrepareAttempt(const machine::PrepareAttempt& prepare);
  void LaunchAttempt();
  void RunPreflight();
  void RunTpuReset(const machine::ResetTpu& reset);
  void ReportStopped(std::int64_t generation);
  void ArmTimer(const machine::ArmTimer& timer);
  void CancelTimer();
  void Signal(int signal);
  bool MaintenanceActive() const;
  machine::Policy PolicyOf(const JobSpec& spec) const;

  // Observation of the current attempt (job_watch.cc).
  void BeginAttemptWatch();
  void EndAttemptWatch();
  Classification ClassifyFailure(const ExitStatus& status, bool hung) const;
  void ArmHangTimer();
  void OnHangTimer();
  // The hang's bundle: captured first, then the hang goes to the machine.
  void CaptureHang(std::string reason);
  void FinishHangCapture(int attempt);
  incident::CaptureRequest BundleRequest(const std::string& trigger, const std::string& reason,
                                         const Classification& verdict, std::int64_t number) const;
  void OnProgressEvent(bool counted);
  // Goodput: the restore marker and progress seen in output seen at `now`.
  void AccountOutput(std::string_view lines, bool counted, SteadyTime now);

  // Incidents (job_watch.cc).
  void OpenIncident(const machine::OpenIncident& open);
  void CloseIncident(const std::string& outcome);
  void PublishIncident();
  LaunchSpec BuildLaunchSpec() const;
  // Who the job's attempts run as (deps_.resolve_run_as; nullopt: as tpud).
  absl::StatusOr<std::optional<RunAs>> JobUser() const;

  JobSpec spec_;
  JobDeps deps_;
  machine::Policy policy_;
  machine::State machine_;                 // What the decisions depend on.
  std::deque<machine::Event> pending_events_;
  bool feeding_ = false;

  WallTime state_since_;
  std::unique_ptr<Attempt> attempt_;
  SteadyTime attempt_started_;
  Clock::TimerId timer_ = 0;               // The state's one timer...
  machine::TimerKind timer_kind_ = machine::TimerKind::kBackoff;  // ...what it is for...
  SteadyTime timer_due_;                   // ...and when it goes off.
  std::optional<SteadyTime> restored_backoff_until_;  // Restore: a backoff timer was running.
  std::optional<SteadyTime> restored_next_rung_;      // Restore: when the next stop signal was due.
  std::optional<ExitStatus> last_exit_;
  std::optional<CheckpointRef> checkpoint_;

  // Failure classification and hang detection for the current attempt.
  std::shared_ptr<const FailureClassifier> classifier_;
  std::shared_ptr<const re2::RE2> restore_re_;  // spec_.progress.restore_regex, multi-line; may be null.
  GoodputLedger goodput_;
  std::optional<AttemptScanner> scanner_;
  std::optional<ProgressTracker> progress_;
  std::shared_ptr<void> heartbeat_watch_;
  Clock::TimerId hang_timer_ = 0;
  std::optional<SteadyTime> hang_deadline_;  // What hang_timer_ is armed for.
  std::uint64_t log_dropped_before_ = 0;  // Log bytes lost by earlier attempts.
  std::uint64_t log_dropped_attempt_ = 0; // ... and by this one.
  bool log_dropping_ = false;

  // Bundles: the attempt's environment as launched, a hang waiting for its
  // capture (its reason), and the incident number and attempt the hang's
  // bundle took.
  std::map<std::string, std::string> attempt_env_;
  std::optional<std::string> hang_capture_reason_;
  std::int64_t hang_bundle_number_ = 0;
  int hang_bundle_attempt_ = 0;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // Callbacks check it: the Job still exists.

  std::deque<Incident> incidents_;  // Newest last, bounded.
  SteadyTime incident_started_;     // Steady time of the open incident's start.
};

// Replaces {checkpoint} and {step} in each of `args`.
std::vector<std::string> ExpandResumeArgs(const std::vector<std::string>& args,
                                          const CheckpointRef& checkpoint);

}  // namespace tpud
