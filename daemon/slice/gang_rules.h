// The gang's decisions, as pure functions of what etcd holds: how a proposal
// changes the generation record, and what the leader does with a stopping
// generation once every worker has reported. No I/O, no clock (times are
// arguments), so the coordinator (coordinator.h) only reads, decides and
// writes, and these rules are tested as tables.
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "daemon/core/clock.h"
#include "daemon/core/gang.h"
#include "daemon/slice/records.h"

namespace tpud::slice {

// `proposal` applied to the gang's current record (none: the gang never
// ran): the record to write with a compare-and-swap, or nullopt when the
// proposal is moot (the gang already moved past what the proposer saw, or
// already is where it asks to go). The first proposal of an incident wins;
// the others become moot when they re-read.
//  - kStop: any active phase -> kStopped(n+1).
//  - kStart, or kRestart with no failure (a person's restart): -> kStopping(n+1)
//    with a fresh budget; kStart is moot while the gang is active.
//  - kRestart with a failure: only from kStarting(n) with n the proposer's
//    base generation -> kStopping(n+1), counted as the proposal says, with a
//    TPU reset when the failure's action asks for one.
//  - kLeave, with n the base generation: from kStarting(n) -> kStopping(n+1),
//    not counted, no cause (as a lost worker: the gang waits for the leaving
//    worker's report, which its next tpud sends); from kStopping(n) (the
//    worker had reported) -> kStopping(n+1) with n's cause, count and reset,
//    so every worker reports again. Moot otherwise.
// What a proposal applies to when etcd's record is older than the proposer
// (etcd wiped, or restored from an older snapshot): the proposer knows
// generation n = base_generation, and etcd has none or an older one. Then a
// record of generation n, kStopped for a person's start (the gang was
// stopped) and kStarting otherwise (the proposer ran it), with the
// proposal's restart policy and a fresh budget; a generation the workers
// would ignore (not above their own) is never committed. `current`
// otherwise (and when base_generation is 0).
std::optional<GenerationRecord> ProposalBasis(const std::optional<GenerationRecord>& current,
                                              const GangProposal& proposal);

std::optional<GenerationRecord> ApplyProposal(const std::optional<GenerationRecord>& current,
                                              const GangProposal& proposal, std::int64_t now_unix_ms);

// A member's lease expired while the gang ran (kStarting): kStopping(n+1),
// not counted (a lost VM is not the program's fault). nullopt in any other
// phase: a stopping gang waits for the worker anyway.
std::optional<GenerationRecord> LoseWorker(const GenerationRecord& current, int worker, std::int64_t now_unix_ms);

// How long the leader waits for a member's report of its stopped attempt
// before it counts the worker lost: a stop ladder ends in SIGKILL well within
// this, so a member still silent holds its lease but does not act (its tpud
// wedged, its clock or network odd). The gang waits for it all the same, as
// for any lost worker (it cannot start without every worker); what changes is
// that waiting_for says so, and the leader logs it.
inline constexpr std::int64_t kReportTimeoutMs = 300'000;

// What the leader does with a kStopping generation.
struct LeaderStep {
  enum Kind {
    kWait,        // Not every worker is present and has reported; `waiting_for` says who.
    kResetSlice,  // Write `next` (reset marked started), reset the slice once, then decide again.
    kCommit,      // Write `next` (kStarting or kFailed) after `delay`.
  };
  Kind kind = kWait;
  std::string waiting_for;       // kWait: e.g. "workers 1 to report; workers 2 lost (no report in 300 s)".
  bool report_timed_out = false; // kWait: some member has been silent past kReportTimeoutMs.
  GenerationRecord next;         // kResetSlice, kCommit.
  Seconds delay{0};              // kCommit to kStarting: the gang's restart backoff.
};

// How a TPU reset the failure asks for happens on a slice.
enum class SliceReset {
  kNone,   // No slice-level reset: the commit's reason says so, and the gang restarts without.
  kLocal,  // Each worker reset its own devices before it reported (tpu.reset.backend local).
  kSlice,  // The leader resets the slice once (queuedResources.reset).
};

// The leader's step for `record` (phase kStopping) given the current members,
// the reports in etcd (by worker), and the slice's size.
// `u` is uniform in [0, 1) (backoff jitter).
//  - A failure whose action is `fail`, or the same failure (class and rule)
//    at the same step as the generation before: kFailed.
//  - A counted failure adds one restart (after resetting the count when the
//    gang had run reset_after_seconds); above max_restarts: kFailed.
//  - Otherwise kStarting(n, S), S the newest step every worker holds.
LeaderStep Decide(const GenerationRecord& record, const std::set<int>& members,
                  const std::map<int, GangReport>& reports, int num_workers, SliceReset reset, double u,
                  std::int64_t now_unix_ms);

// Why the members cannot form one gang with this worker, or empty: a member
// configured with another slice.num_workers, or a member's worker id outside
// 0..num_workers-1. Every worker computes it from the member keys, so each
// shows it, not only the leader. Pure.
std::string ConfigConflict(int worker_id, int num_workers, const std::map<int, MemberRecord>& members);

}  // namespace tpud::slice
