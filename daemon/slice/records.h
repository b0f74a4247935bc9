// What the workers of a slice keep in etcd, key by key, and its JSON form.
//
// Keys, under `{prefix}/slices/{slice}/` (prefix: the `slice.etcd.prefix`
// config key, default /tpud):
//   members/{worker}         MemberRecord; attached to the worker's lease, so it
//                            vanishes when the worker's tpud is gone for a TTL.
//   leader                   the leading worker's id, on its lease; created by
//                            a Txn on create_revision == 0 (etcd's election
//                            pattern, https://etcd.io/docs/v3.4/dev-guide/api_concurrency_reference_v3/).
//   gangs/{job}/spec         the job spec as submitted (YAML), for every worker to run.
//   gangs/{job}/generation   GenerationRecord: the gang's committed generation.
//   gangs/{job}/reports/{worker}  GangReport of a stopped worker (no lease: a
//                            report outlives a tpud restart).
//   gangs/{job}/status/{worker}   WorkerJobStatus: the job as that worker runs
//                            it, for `tpuctl status` on any worker.
//   gangs/{job}/events/{worker}   WorkerEvents: that worker's newest state
//                            changes of the job, for `tpuctl events` on any worker.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/exit_status.h"
#include "daemon/core/failure_rule.h"
#include "daemon/core/gang.h"
#include "daemon/core/job_spec.h"

namespace tpud::slice {

// The key layout of one slice.
struct Keys {
  std::string root;  // "{prefix}/slices/{slice}/"

  Keys(const std::string& prefix, const std::string& slice);
  std::string members() const { return root + "members/"; }
  std::string member(int worker) const { return members() + std::to_string(worker); }
  std::string leader() const { return root + "leader"; }
  std::string gangs() const { return root + "gangs/"; }
  std::string gang(const std::string& job) const { return gangs() + job + "/"; }
  std::string spec(const std::string& job) const { return gang(job) + "spec"; }
  std::string generation(const std::string& job) const { return gang(job) + "generation"; }
  std::string reports(const std::string& job) const { return gang(job) + "reports/"; }
  std::string report(const std::string& job, int worker) const { return reports(job) + std::to_string(worker); }
  std::string status(const std::string& job, int worker) const {
    return gang(job) + "status/" + std::to_string(worker);
  }
  std::string events(const std::string& job, int worker) const {
    return gang(job) + "events/" + std::to_string(worker);
  }
  std::string attempt(const std::string& job, int worker) const {
    return gang(job) + "attempts/" + std::to_string(worker);
  }

  // "members/3" -> 3; nullopt for any other key.
  std::optional<int> MemberOf(const std::string& key) const;
  // ".../gangs/JOB/generation" -> ("JOB", "generation"); ".../gangs/JOB/reports/2" -> ("JOB", "reports/2").
  std::optional<std::pair<std::string, std::string>> GangKeyOf(const std::string& key) const;
};

// One worker's tpud, as `tpuctl slice` shows it.
struct MemberRecord {
  int worker = -1;
  std::string host;
  std::string version;   // tpud's version.
  std::int64_t pid = 0;
  std::int64_t joined_unix_ms = 0;
  // The holder's state_dir: only a tpud with the same one (its restart, which
  // holds its attempts) may take over the key of an exited holder on its host.
  std::string state_dir;
  // The holder's slice.num_workers: every worker of a slice must agree on it.
  // 0: unknown (a record written before tpud published it).
  int num_workers = 0;
};

// The failure that caused a generation.
struct GangCause {
  int worker = -1;
  FailureClass failure_class = FailureClass::kUnknown;
  RecoveryAction action = RecoveryAction::kRestart;
  std::string rule;
  std::optional<std::int64_t> step;
  bool counted = false;
  bool operator==(const GangCause&) const = default;
};

// The gang's generation as stored: the commit every worker follows, and what
// the leader needs to decide the next phase.
struct GenerationRecord {
  GangCommit commit;
  std::optional<GangCause> cause;       // This generation's failure; none for a person's request or a lost worker.
  std::optional<GangCause> last_cause;  // The cause of the generation before (same failure twice at one step: fail).
  bool counted = false;                 // Whether this generation counts against max_restarts.
  RestartPolicy restart;                // The job's, from the proposal.
  std::int64_t started_unix_ms = 0;     // When the generation's phase last became kStarting (reset_after).
  std::int64_t stopping_unix_ms = 0;    // When it became kStopping.
  bool slice_reset_started = false;     // The leader began the slice reset of this generation.
  // The generation a person's start or restart last began: a stop proposed
  // from an older generation (one a restarted tpud sends again) is moot.
  std::int64_t person_generation = 0;
  bool operator==(const GenerationRecord&) const = default;
};

// One worker's view of a gang job, as `tpuctl status NAME` shows per worker.
struct WorkerJobStatus {
  int worker = -1;
  std::string state;                  // JobStateName: "running", "backoff", ...
  std::string reason;
  int attempt = 0;
  int pid = 0;
  std::int64_t generation = 0;        // Of its newest attempt.
  std::optional<std::int64_t> last_step;
  std::int64_t state_since_unix_ms = 0;
  bool operator==(const WorkerJobStatus&) const = default;
};

// One state change of a gang job on one worker (a transition of `tpuctl
// events`; incidents stay on their worker).
struct GangEvent {
  std::int64_t sequence = 0;         // The worker's own event number (daemon-wide there, increasing).
  std::int64_t time_unix_ms = 0;
  std::string from;                  // JobStateName of the states.
  std::string to;
  std::string reason;
  int attempt = 0;
  std::optional<std::int64_t> step;  // The checkpoint step it resumes from, on entering "starting".
  std::optional<ExitStatus> exit;    // How the attempt ended, when that caused the change.
  bool operator==(const GangEvent&) const = default;
};

// A worker's newest events of one gang job, oldest first, at most
// kMaxWorkerEvents of them.
struct WorkerEvents {
  static constexpr std::size_t kMaxWorkerEvents = 50;
  int worker = -1;
  std::vector<GangEvent> events;
  bool operator==(const WorkerEvents&) const = default;
};

std::string EncodeEvents(const WorkerEvents& events);
absl::StatusOr<WorkerEvents> DecodeEvents(const std::string& json);

std::string EncodeStatus(const WorkerJobStatus& status);
absl::StatusOr<WorkerJobStatus> DecodeStatus(const std::string& json);

std::string EncodeMember(const MemberRecord& member);
absl::StatusOr<MemberRecord> DecodeMember(const std::string& json);
std::string EncodeGeneration(const GenerationRecord& record);
absl::StatusOr<GenerationRecord> DecodeGeneration(const std::string& json);
// A gang attempt a worker's tpud runs, at gangs/JOB/attempts/W: written when
// it starts, deleted when it has ended. On no lease: it outlives a tpud that
// died, as the attempt does under its shim, so another tpud that takes the
// worker id over does not start a second trainer beside it (the fence of
// issue "one trainer per worker id").
struct AttemptRecord {
  int worker = -1;
  std::string host;
  std::string state_dir;   // With host: which tpud (its restarts keep both).
  std::int64_t pid = 0;    // The trainer's.
  int attempt = 0;
  std::int64_t generation = 0;
  std::int64_t started_unix_ms = 0;
  bool operator==(const AttemptRecord&) const = default;
};
std::string EncodeAttempt(const AttemptRecord& record);
absl::StatusOr<AttemptRecord> DecodeAttempt(const std::string& json);

// A gang proposal that must outlive this tpud until etcd has it: a stop or
// a leave (kept in state_dir/slice-proposals.json, pending_proposals.h).
struct PendingProposal {
  std::string job;
  GangProposal proposal;
};
// Only stop and leave proposals are encoded; others are skipped.
std::string EncodePendingProposals(const std::vector<PendingProposal>& pending);
absl::StatusOr<std::vector<PendingProposal>> DecodePendingProposals(const std::string& json);

std::string EncodeReport(const GangReport& report);
absl::StatusOr<GangReport> DecodeReport(const std::string& json);

}  // namespace tpud::slice
