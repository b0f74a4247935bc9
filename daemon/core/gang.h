// A gang: one job run by every worker of a multi-host TPU slice, which stops
// and restarts as one (job spec `gang: true`). These are the values the
// workers and the slice coordination (daemon/slice/) exchange through etcd;
// the per-worker job machine (supervisor/job_machine.h) reacts to them.
//
// The protocol is TorchElastic's rendezvous and JobSet's restart-all shape:
// one monotonic generation per gang, held in etcd. Any failure on any worker
// proposes generation n+1 (a compare-and-swap: the first proposal wins);
// every worker stops its attempt and reports the steps of its complete
// checkpoints; the slice's leader commits `starting(n+1, S)` with S the
// newest step every worker holds, and every worker starts from its own
// checkpoint at S. No attempt starts without the committed `starting` of its
// generation.
//
// Thread-safety: plain values; GangLink says its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/failure_rule.h"
#include "daemon/core/job_spec.h"

namespace tpud {

// Where a committed generation is.
enum class GangPhase {
  kStopping,  // Every worker stops its attempt and reports its checkpoint steps.
  kStarting,  // Every worker starts its attempt of this generation, from `step`.
  kStopped,   // A person stopped the gang: every worker stops and stays stopped.
  kFailed,    // The gang gave up: every worker stops and shows `reason`.
};

// "stopping", "starting", "stopped", "failed".
const char* GangPhaseName(GangPhase phase);
std::optional<GangPhase> ParseGangPhase(const std::string& name);

// What a worker (or a person, through any worker) asks of the gang.
struct GangProposal {
  // kLeave: this worker's tpud is shutting down and stops its attempt
  // (stop_jobs_on_exit); the gang restarts, uncounted, once it is back.
  enum class Intent { kRestart, kStart, kStop, kLeave };
  Intent intent = Intent::kRestart;
  std::int64_t base_generation = 0;  // The generation the proposer saw; a newer one makes it moot.
  int worker = -1;                   // Who proposes.
  std::string reason;                // "worker 2: crash: exit code 1", "stop requested".
  // For a failure: how it was classified, the step it reached, and whether
  // it counts against max_restarts (preemptions and lost workers do not).
  std::optional<Classification> failure;
  std::optional<std::int64_t> step;
  bool counted = false;
  // The job's restart policy (every worker has the same spec): the leader
  // applies it (budget, backoff) without knowing the job itself.
  RestartPolicy restart;
};

// A generation as committed in etcd: what every worker acts on.
struct GangCommit {
  std::int64_t generation = 0;
  GangPhase phase = GangPhase::kStopping;
  std::string reason;                   // One line, for `tpuctl status` and events.
  std::optional<std::int64_t> step;     // kStarting: the step every worker resumes from (none: scratch).
  // kStopping: a TPU reset the failure calls for (workers with a local reset
  // backend run it before reporting; the leader resets a slice once).
  std::optional<FailureClass> reset_class;
  int restarts = 0;                     // The gang's, counted against max_restarts.
  std::map<std::string, std::int64_t> restarts_by_reason;
  bool operator==(const GangCommit&) const = default;
};

// What one worker reports once its attempt of an earlier generation is gone.
struct GangReport {
  int worker = -1;
  std::int64_t generation = 0;        // The kStopping generation it reports for.
  std::vector<std::int64_t> steps;    // Complete checkpoint steps it holds, ascending.
};

// The newest step in every report's steps; nullopt when there is none in
// common (or no report): the gang starts from scratch.
std::optional<std::int64_t> CommonStep(const std::vector<GangReport>& reports);

// What a gang job's Job asks of the slice (daemon/slice/ in production).
// Called on the daemon's loop; must not block (etcd is reached from elsewhere).
class GangLink {
 public:
  virtual ~GangLink() = default;
  // Proposes the gang's next generation; the answer arrives later as a commit
  // (Supervisor::OnGangCommitted). Kept and retried while etcd is unreachable.
  virtual void Propose(const std::string& job, const GangProposal& proposal) = 0;
  // This worker's attempt of an earlier generation is gone.
  virtual void Report(const std::string& job, const GangReport& report) = 0;
  // A gang job was added on this worker: deliver the gang's current
  // generation to it (it may have been committed before the job existed here).
  virtual void Join(const std::string& job) = 0;
  // A gang spec submitted on this worker (`tpuctl start -f`): stored for
  // every worker of the slice to run (`spec_yaml` as submitted).
  virtual void Publish(const std::string& job, const std::string& spec_yaml) = 0;
  // This worker's attempt of `job` runs (pid > 0: started or re-attached)
  // or has ended (pid 0). Recorded for the slice, so no other tpud starts
  // a second trainer of this worker id beside it. Default: not recorded.
  virtual void AttemptChanged(const std::string& job, int attempt, int pid, std::int64_t generation) {}
  // Why this worker must not start an attempt of `job` now: another tpud's
  // attempt of this worker id is recorded as running (which, where, and
  // the fix). Empty: free. Default: always free.
  virtual std::string AttemptHeldElsewhere(const std::string& job) const { return ""; }
};

}  // namespace tpud
