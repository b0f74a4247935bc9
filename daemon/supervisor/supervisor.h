// The set of jobs, and what the outside (RPC, metrics, main) may do to them.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/supervisor/fanout.h"
#include "daemon/state/state_store.h"
#include "daemon/supervisor/job.h"

namespace tpud {

// What `tpuctl events` streams: state changes and incidents, in order.
using SupervisorEvent = std::variant<JobEvent, Incident>;
struct NumberedEvent {
  std::int64_t sequence = 0;  // Daemon-wide, increasing.
  SupervisorEvent event;
  const std::string& job() const;
};

// Whether the state store takes writes: what `tpuctl info`, STATUS= and the
// metrics report. A failed write is never silent: it is logged, counted, and
// makes `ok` false until a write succeeds again.
struct StoreHealth {
  bool ok = true;
  std::string last_error;         // The newest failure's message; kept after recovery.
  std::int64_t errors_total = 0;  // Failed writes since tpud started.
};

// Who made a request over the control socket (rpc/peer_auth.h).
struct Caller {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;
  bool root() const { return uid == 0; }
};

// Thread-safety: every method runs on the event loop thread (other threads go
// through RunOnLoop), except events() and output(), which are thread-safe.
class Supervisor final : public JobListener {
 public:
  struct Options {
    std::filesystem::path log_dir;    // Job logs: log_dir/NAME.log.
    std::filesystem::path state_dir;  // Working directory of jobs that name none.
    std::size_t event_history = 10000;  // Events kept for `tpuctl events`.
    // Jobs submitted over the socket (`tpuctl start -f`, ad hoc) kept at
    // once, and the bytes of their specs together: each costs memory, a row
    // and a startup parse. `tpuctl remove` frees a slot.
    std::size_t max_submitted_jobs = 256;
    std::size_t max_submitted_spec_bytes = 16 << 20;
  };

  // The checks made before each attempt, given the process groups of all
  // jobs' live attempts (TpuPreflight::Check in production).
  using Preflight = std::function<PreflightVerdict(const JobSpec&, const std::vector<int>& attempt_pgids)>;

  // Everything the Supervisor uses from outside, given once, at construction.
  // Pointers are not owned and must outlive the Supervisor.
  struct Deps {
    Clock* clock = nullptr;        // Required.
    Launcher* launcher = nullptr;  // Required.
    // Persists every job change and incident. Null: nothing survives a restart.
    StateStore* store = nullptr;
    // Null: FindNewestCheckpoint.
    decltype(JobDeps::find_checkpoint) find_checkpoint;
    // Uniform in [0, 1), for backoff jitter. Null: a PRNG seeded from random_device.
    std::function<double()> random;
    // Heartbeat files (JobDeps::watch_file). Null: not watched.
    decltype(JobDeps::watch_file) watch_file;
    // Resets the TPU for jobs whose failure calls for it (JobDeps::reset_tpu,
    // TpuRecovery in production); every request carries the process groups
    // of all jobs' current attempts as spare_pgids. Null: jobs restart without.
    decltype(JobDeps::reset_tpu) reset_tpu;
    // Null: no checks before attempts.
    Preflight preflight;
    // Gang jobs (spec `gang: true`): the slice, this worker's id and the
    // slice's size (daemon/slice/). Null: gang jobs run alone, as any job.
    GangLink* gang = nullptr;
    int worker_id = -1;
    int num_workers = 0;
    // Whether reset_tpu resets this worker's own devices (tpu.reset.backend
    // local): then every worker of a gang resets before it reports.
    bool reset_is_local = false;
    // Null: FindCheckpointAtStep and ListCompleteSteps (checkpoint.h).
    decltype(JobDeps::find_checkpoint_at_step) find_checkpoint_at_step;
    decltype(JobDeps::list_checkpoint_steps) list_checkpoint_steps;
    // Incident bundles (JobDeps::capture_incident). Null: none.
    decltype(JobDeps::capture_incident) capture_incident;
    // Called when a job is removed: its bundles are moved aside, so a new
    // job of the same name does not meet them. Null: nothing to do.
    std::function<void(const std::string& job)> retire_incidents;
    Seconds capture_seconds{10};
  };

  Supervisor(Deps deps, Options options);
  // No store, checkpoints found by FindNewestCheckpoint, no TPU: as in most tests.
  Supervisor(Clock& clock, Launcher& launcher, Options options);
  ~Supervisor() override;

  // The process groups of all jobs' current attempts (what a TPU reset spares).
  std::vector<int> AttemptProcessGroups() const;

  // Brings back what an earlier tpud stored: jobs submitted over the API
  // (re-parsed from their saved spec), every job's state, counters and
  // incidents. Call after adding the configured jobs, before Resume.
  absl::Status RestoreFromStore();
  // Re-attaches `attempts` (job name -> {attempt number, attempt}) and lets
  // every job carry on: see Job::Resume.
  using Reattached = std::map<std::string, std::pair<int, std::unique_ptr<Attempt>>>;
  void Resume(Reattached attempts);

  // `spec` as this worker runs it: a gang spec with {worker_id} and
  // {num_workers} expanded (ExpandWorker) when the slice is wired; else as is.
  JobSpec ForThisWorker(JobSpec spec) const;
  // Adds a configured job (stopped). AlreadyExists for a taken name.
  absl::Status AddJob(JobSpec spec);
  // Adds a gang job another worker of the slice submitted (published through
  // etcd), stopped and recorded like a submitted job; the gang's commits
  // start it. A gang job of that name already here (submitted or adopted)
  // takes a different spec from its next attempt on: a resubmission on any
  // worker reaches every worker. A configured job is kept as it is (OK).
  // Errors: FailedPrecondition for a non-gang job of that name; the state
  // store's, with nothing changed.
  absl::Status AdoptGangSpec(JobSpec spec, std::string spec_yaml);
  Job* FindJob(const std::string& name) const;
  // Config reload (daemon/app/reload.h). ReplaceJobSpec: the job keeps its
  // state, counters and current attempt; the new spec's command, env,
  // working_dir, checkpoint, log and progress apply from its next attempt,
  // its restart and stop policies from now. NotFound for an unknown name.
  absl::Status ReplaceJobSpec(JobSpec spec);
  // Forgets an inactive job (and its stored record). NotFound for an unknown
  // name, FailedPrecondition while it is active.
  absl::Status RemoveJob(const std::string& name);
  // Adds or replaces a submitted spec and starts it. FailedPrecondition when a
  // job of that name is active (stop it first). ResourceExhausted past
  // max_submitted_jobs / max_submitted_spec_bytes.
  // `caller` (unset: tpud itself or a test) decides who the job runs as: a
  // non-root caller's job runs as the caller (spec.user/group filled in),
  // naming another user, or a group the caller is not in, is
  // PermissionDenied, and so is replacing a job that is not the caller's.
  absl::StatusOr<JobSnapshot> SubmitAndStart(JobSpec spec, const std::string& reason,
                                             std::string spec_yaml = "",
                                             std::optional<Caller> caller = std::nullopt);
  // Forgets an inactive submitted or ad hoc job: its record, incidents and
  // events (never its logs or checkpoints). NotFound for an unknown name,
  // FailedPrecondition while it is active or when it comes from the config
  // (remove it there), PermissionDenied for a non-root caller whose job it is
  // not.
  absl::Status RemoveSubmittedJob(const std::string& name, std::optional<Caller> caller = std::nullopt);
  // Starts every job with autostart: true.
  void StartAutostartJobs();
  // A gang's committed generation (from the slice): the job follows it.
  // Ignored for an unknown or non-gang job.
  void OnGangCommitted(const std::string& job, const GangCommit& commit);
  // This tpud could not join the slice (`conflict`: why), or joined again
  // (empty): every gang job stops or resumes following the gang. A job
  // adopted later learns it too.
  void OnSliceMembership(const std::string& conflict);

  // NotFound for an unknown name; FailedPrecondition from Job::Start.
  absl::StatusOr<JobSnapshot> Start(const std::string& name, const std::string& reason);
  absl::StatusOr<JobSnapshot> Stop(const std::string& name, const std::string& reason);
  absl::StatusOr<JobSnapshot> Restart(const std::string& name, const std::string& reason);
  absl::StatusOr<JobSnapshot> Get(const std::string& name) const;
  std::vector<JobSnapshot> List() const;  // Sorted by name.

  // What the state store's writes have done (see StoreHealth).
  const StoreHealth& store_health() const { return store_health_; }

  // tpud is shutting down: stops every active job (Job::StopForShutdown: a
  // gang worker leaves its gang rather than stop it); calls `done` (on the
  // loop) once every job is stopped_for_shutdown().
  void StopAll(const std::string& reason, std::function<void()> done);

  // A GCE metadata value changed (instance/preempted, instance/maintenance-event):
  // a notice sends every running job its checkpoint signal; its end restarts
  // the jobs that waited for it.
  void OnMetadataChange(const std::string& key, const std::string& value);
  bool maintenance_active() const { return !maintenance_.empty(); }

  // Past events (oldest first) for `job` (empty: all), at most `max` (0: all).
  std::vector<NumberedEvent> EventHistory(const std::string& job, std::size_t max) const;
  bool HasJob(const std::string& name) const { return jobs_.count(name) != 0; }
  std::filesystem::path LogPath(const std::string& name) const;

  Fanout<NumberedEvent>& events() { return events_; }
  Fanout<std::string>& output() { return output_; }

  // JobListener.
  void OnJobEvent(const JobEvent& event) override;
  void OnJobOutputLines(const std::string& job, std::string_view lines) override;
  void OnIncident(const Incident& incident) override;
  void OnJobUpdated(const std::string& job) override;

 private:
  absl::StatusOr<Job*> Find(const std::string& name) const;
  std::unique_ptr<Job> MakeJob(JobSpec spec);
  void CheckStopAllDone();
  void Record(const std::string& job, SupervisorEvent event);
  void PersistJob(const Job& job);
  void PersistIncident(const Incident& incident);
  void PersistEvent(const JobEvent& event);
  // Records `status` of a store write (`what` names it): logs and counts a
  // failure, marks the store healthy again on success. Returns `status`.
  absl::Status NoteStore(absl::Status status, const std::string& what);
  // Before acting on what a person asked: records the job's intent
  // (`desired_running`) and syncs it. Unavailable, naming the store error,
  // when that fails: the request is then not carried out.
  absl::Status CommitIntent(const Job& job, bool desired_running);
  absl::Status CheckSubmission(const JobSpec& spec, const std::string& spec_yaml,
                               const std::optional<Caller>& caller) const;
  absl::Status CheckOwner(const Job& job, const std::optional<Caller>& caller) const;
  void RestoreHistory(const std::vector<JobRecord>& records);
  // After what a person asked for (start, stop, submit, ...): makes the
  // records so far survive a power loss (StateStore::Sync). Returns `result`.
  template <typename T>
  T Durable(T result) {
    SyncStore();
    return result;
  }
  void SyncStore();

  Deps deps_;
  Options options_;
  std::map<std::string, std::string> maintenance_;  // Metadata key -> value, while a notice is in force.
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::set<std::string> restored_;  // Jobs RestoreFromStore found a record for.
  std::map<std::string, std::string> spec_yaml_;
  std::string slice_conflict_;  // Why this tpud is not a member of the slice; empty: it is (or no slice).  // Submitted jobs: their spec, to persist.
  StoreHealth store_health_;
  std::deque<NumberedEvent> history_;
  std::int64_t next_sequence_ = 1;
  std::function<void()> stop_all_done_;
  Fanout<NumberedEvent> events_;
  Fanout<std::string> output_;
};

}  // namespace tpud
