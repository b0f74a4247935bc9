// The durable state store: what tpud must remember across its own restarts and
// VM reboots — each job's intent, attempt and restart counts, and the history
// of incidents (one failure and its recovery each).
//
// tpud writes here *before* acting (before launching, stopping, resetting), so
// after a crash or a reboot it resumes every job the user wanted running and
// an incident that was open when the VM went down is closed by the next boot,
// its downtime covering the whole outage.
//
// Implementations:
//   OpenSqliteStateStore  production; SQLite in state_dir/tpud.db.
//   MakeMemoryStateStore  in-memory, same behaviour, for unit tests.
// tpud never deletes state: neither implementation removes a database file, and
// DeleteJob keeps the job's incidents.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/exit_status.h"

namespace tpud {

// What must survive a tpud restart or a VM reboot about one job.
struct JobRecord {
  std::string name;                // Primary key; must not be empty.
  std::string spec_yaml;           // Submitted/ad hoc jobs: their spec. Configured jobs: empty
                                   // (their spec comes from the config).
  std::string origin;              // JobSpec::origin: "config:FILE", "submitted:FILE", "adhoc".
  bool desired_running = false;    // Intent: start/restart set it; stop, succeeded and failed
                                   // clear it. After a boot, tpud starts the jobs that have it.
  std::string state;               // Last known JobStateName(): "running", "backoff", ...
  std::string state_reason;        // Why it entered `state` (JobSnapshot::reason).
  std::int64_t state_since_unix_ms = 0;
  int attempt = 0;                 // Number of the latest attempt (1-based; 0: none yet).
  int restarts = 0;                // Automatic restarts in the current budget.
  std::int64_t attempts_total = 0;
  std::map<std::string, std::int64_t> restarts_by_reason;  // "exit_code", "signal", ...
                                   // (SQLite keeps it as JSON: keys should be UTF-8).
  std::optional<ExitStatus> last_exit;  // How the latest finished attempt ended.
  int pid = 0;                     // Of the running attempt (to re-attach through a shim); 0: none.
  std::string attempt_dir;         // Where that attempt's shim keeps its socket and exit
                                   // file; may be empty.
  // Where an active job was in its state, so a restarted tpud carries it on
  // from there instead of starting the state over (schema version 2).
  std::int64_t attempt_started_unix_ms = 0;  // The current attempt's start; 0: none.
  std::int64_t backoff_until_unix_ms = 0;    // Backoff: when the next attempt is due; 0: no
                                             // timer (waiting for a maintenance event or reset).
  int stop_rung = -1;                        // Stopping: index in stop.signals of the last
                                             // signal sent; -1: none yet.
  std::int64_t stop_next_rung_unix_ms = 0;   // Stopping: when the next signal is due; 0: none.
  std::string stop_intent;                   // Stopping: "stop" (a person's), "restart" (start
                                             // again after), "hang" (tpud stopped a hung attempt).
  std::string reset_pending;                 // A TPU reset asked for and not done: the failure
                                             // class it is for; "" when none.
  std::int64_t log_dropped_bytes = 0;        // Output the job log lost (full disk), all attempts.
  std::string run_as_user;                   // Who the job runs as when that is not in its spec
  std::string run_as_group;                  // (a job submitted by a non-root caller); "" else.
  // Gang jobs (schema version 3): the generation of the newest attempt, and
  // a generation whose attempt failed here (so a restarted tpud does not
  // relaunch it alone); 0: none.
  std::int64_t gang_generation = 0;
  std::int64_t gang_failed_generation = 0;

  // Field by field (ExitStatus has no operator==).
  bool operator==(const JobRecord&) const;
};

// One failure of a job and its recovery. Times are Unix epoch milliseconds.
struct IncidentRecord {
  std::int64_t id = 0;             // Assigned by OpenIncident (1, 2, ...); never reused.
  std::string job;                 // Must not be empty.
  int attempt = 0;                 // The attempt that failed.
  std::int64_t started_unix_ms = 0;
  std::int64_t ended_unix_ms = 0;  // 0 while open (e.g. while the VM is down).
                                   // Downtime = ended_unix_ms - started_unix_ms.
  std::string failure_class;       // The classifier's class, e.g. "preemption", "oom".
  std::string action;              // What tpud did: "restart", "reset_tpu_then_restart", ...
  std::string hint;                // The advice shown to the user.
  std::string matched_line;        // The log line that decided the class; may be empty.
  std::string exit_description;    // ExitStatus::Describe() of the failed attempt.
  std::int64_t step_reached = -1;  // Last training step seen; -1: unknown.
  std::int64_t checkpoint_step = -1;  // Step of the checkpoint resumed from; -1: none/unknown.
                                   // Steps lost = step_reached - checkpoint_step when both >= 0.
  std::string reset_backend;       // "", "gce_api", "queued_resources", ... when a reset was made.
  std::int64_t reset_duration_ms = 0;
  std::string reset_result;        // "ok", or the reset's error.
  std::string notes;               // Free text, appended to as the recovery proceeds.

  bool is_open() const { return ended_unix_ms == 0; }
  bool operator==(const IncidentRecord&) const = default;
};

// One state change of one job, as `tpuctl events` shows it after a restart.
struct EventRecord {
  std::int64_t id = 0;             // Assigned by AppendEvent (1, 2, ...), in order.
  std::string job;                 // Must not be empty.
  std::int64_t time_unix_ms = 0;
  std::string from_state;          // JobStateName()s.
  std::string to_state;
  std::string reason;
  int attempt = 0;
  std::optional<ExitStatus> exit;  // When an attempt's end caused it.
  std::string checkpoint_path;     // On entering starting: what it resumes from; "" none.
  std::int64_t checkpoint_step = -1;

  bool operator==(const EventRecord&) const;
};

// How much history the store keeps: the newest incidents per job, the newest
// events in all. Older ones are deleted as new ones arrive (so 200 jobs that
// each crashed 10,000 times hold 20,000 incidents, not 2,000,000).
inline constexpr int kIncidentsKeptPerJob = 100;
inline constexpr int kEventsKept = 10000;

// The schema version OpenSqliteStateStore writes (SQLite `PRAGMA user_version`).
inline constexpr int kStateSchemaVersion = 3;

// Durable storage of JobRecords and IncidentRecords.
//
// Durability: a write that returned OK is committed: it survives a crash or
// SIGKILL of tpud. It survives a power loss once Sync() has returned OK after
// it (SQLite store: journal_mode=WAL, synchronous=NORMAL; Sync checkpoints the
// WAL, fsyncing it). Each call is one transaction: it happens completely or
// not at all. A failed write changes nothing.
// Errors: InvalidArgument for a malformed record; NotFound as stated below;
// for the SQLite store DataLoss (corrupt file), PermissionDenied, Unavailable
// (locked by another process past the busy timeout), ResourceExhausted (disk
// full) or Internal, the message naming the database path.
// Thread-safety: every method is safe to call from any thread (an internal
// mutex serialises them); the supervisor calls them from its loop thread.
class StateStore {
 public:
  virtual ~StateStore() = default;

  // Inserts the job, or replaces every field of the one with the same name.
  virtual absl::Status PutJob(const JobRecord& job) = 0;
  // Forgets the job's record; with `with_history` its incidents and events
  // too (else they stay). OK when there was none.
  virtual absl::Status DeleteJob(const std::string& name, bool with_history = false) = 0;
  // Every job, ordered by name.
  virtual absl::StatusOr<std::vector<JobRecord>> LoadJobs() = 0;

  // Records a new incident; `incident.id` is ignored. Returns the assigned id.
  // Deletes the job's incidents older than its newest kIncidentsKeptPerJob.
  virtual absl::StatusOr<std::int64_t> OpenIncident(const IncidentRecord& incident) = 0;
  // Replaces every field of incident `incident.id` (set ended_unix_ms to close
  // it). NotFound when no incident has that id.
  virtual absl::Status UpdateIncident(const IncidentRecord& incident) = 0;
  // The newest `limit` incidents of `job` (of all jobs when `job` is empty),
  // oldest first, newest last. `limit` <= 0: all of them.
  virtual absl::StatusOr<std::vector<IncidentRecord>> ListIncidents(const std::string& job,
                                                                    int limit) = 0;
  // Every incident still open (ended_unix_ms == 0), oldest first.
  virtual absl::StatusOr<std::vector<IncidentRecord>> OpenIncidents() = 0;

  // Appends a state change (`event.id` is ignored); keeps the newest
  // kEventsKept. Returns the assigned id.
  virtual absl::StatusOr<std::int64_t> AppendEvent(const EventRecord& event) = 0;
  // The newest `limit` events (all when <= 0), oldest first.
  virtual absl::StatusOr<std::vector<EventRecord>> ListEvents(int limit) = 0;

  // Makes every write that returned before it survive a power loss (costs an
  // fsync or two: call it after what a person asked for, not per transition).
  virtual absl::Status Sync() = 0;
};

// Opens (creating it and state_dir when missing) the SQLite database
// state_dir/tpud.db, brings its schema up to kStateSchemaVersion by running
// the migrations it lacks, and checks its integrity (PRAGMA quick_check).
// Errors, each naming the file and never deleting it: DataLoss when it is not
// a SQLite database or is corrupt; FailedPrecondition when a newer tpud wrote
// it (schema version above kStateSchemaVersion); PermissionDenied when it, or
// state_dir, cannot be written; Unavailable when another process holds it
// locked for longer than the 5 s busy timeout.
// The connection holds the file exclusively for its whole life (SQLite
// locking_mode=EXCLUSIVE): a second opener, such as a second tpud on the same
// state_dir, gets Unavailable. So the WAL index lives in the process's heap
// and no -shm file is mapped: an unwritable or full disk makes writes fail
// (reported), never SIGBUS. The files are mode 0600: submitted specs and
// their env may hold secrets.
absl::StatusOr<std::unique_ptr<StateStore>> OpenSqliteStateStore(
    const std::filesystem::path& state_dir);

// A StateStore kept in memory, lost when destroyed; behaves like the SQLite one
// (same ordering, id assignment and errors). For unit tests of the supervisor.
std::unique_ptr<StateStore> MakeMemoryStateStore();

// The InvalidArgument checks both implementations apply before writing.
absl::Status CheckJobRecord(const JobRecord& job);
absl::Status CheckIncidentRecord(const IncidentRecord& incident);
absl::Status CheckEventRecord(const EventRecord& event);

}  // namespace tpud
