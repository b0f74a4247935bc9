#include "daemon/slice/gang_rules.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/backoff.h"
#include "daemon/core/restart_rules.h"

namespace tpud::slice {
namespace {

bool Active(const GenerationRecord& record) {
  return record.commit.phase == GangPhase::kStopping || record.commit.phase == GangPhase::kStarting;
}

// The next generation's record, carrying the budget and history forward.
GenerationRecord Next(const std::optional<GenerationRecord>& current, GangPhase phase, std::string reason,
                      std::int64_t now_unix_ms) {
  GenerationRecord next;
  if (current) {
    next.commit.generation = current->commit.generation;
    next.commit.restarts = current->commit.restarts;
    next.commit.restarts_by_reason = current->commit.restarts_by_reason;
    next.last_cause = current->cause ? current->cause : current->last_cause;
    next.started_unix_ms = current->started_unix_ms;
    next.restart = current->restart;
    next.person_generation = current->person_generation;
  }
  ++next.commit.generation;
  next.commit.phase = phase;
  next.commit.reason = std::move(reason);
  next.stopping_unix_ms = now_unix_ms;
  return next;
}

}  // namespace

std::optional<GenerationRecord> ProposalBasis(const std::optional<GenerationRecord>& current,
                                              const GangProposal& proposal) {
  if (proposal.base_generation <= 0 || (current && current->commit.generation >= proposal.base_generation)) {
    return current;
  }
  GenerationRecord basis;
  basis.commit.generation = proposal.base_generation;
  basis.commit.phase = proposal.intent == GangProposal::Intent::kStart ? GangPhase::kStopped : GangPhase::kStarting;
  basis.commit.reason = absl::StrCat("re-established from worker ", proposal.worker, "'s generation ",
                                     proposal.base_generation, " (etcd had ",
                                     current ? absl::StrCat("generation ", current->commit.generation) : "none", ")");
  basis.restart = proposal.restart;
  return basis;
}

std::optional<GenerationRecord> ApplyProposal(const std::optional<GenerationRecord>& current,
                                              const GangProposal& proposal, std::int64_t now_unix_ms) {
  const bool active = current && Active(*current);
  switch (proposal.intent) {
    case GangProposal::Intent::kLeave: {
      if (!current || current->commit.generation != proposal.base_generation) return std::nullopt;
      if (current->commit.phase == GangPhase::kStopping) {
        // The leaving worker had reported: the next generation asks every
        // worker again, so the leader waits for it. The stop's cause, count
        // and reset carry over unchanged.
        GenerationRecord next = *current;
        ++next.commit.generation;
        next.commit.reason = absl::StrCat(current->commit.reason, "; ", proposal.reason);
        return next;
      }
      if (current->commit.phase != GangPhase::kStarting) return std::nullopt;
      GenerationRecord next = Next(current, GangPhase::kStopping, proposal.reason, now_unix_ms);
      next.cause.reset();
      next.last_cause.reset();  // Not back to back any more, as for a lone job after a preemption.
      next.counted = false;
      return next;
    }
    case GangProposal::Intent::kStop: {
      // Moot when a person started the gang again after the proposer's generation.
      if (!active || current->person_generation > proposal.base_generation) return std::nullopt;
      GenerationRecord next = Next(current, GangPhase::kStopped, proposal.reason, now_unix_ms);
      next.restart = proposal.restart;
      return next;
    }
    case GangProposal::Intent::kStart:
    case GangProposal::Intent::kRestart:
      if (proposal.intent == GangProposal::Intent::kStart && active) return std::nullopt;
      if (!proposal.failure) {  // A person's start or restart: a fresh budget and history.
        GenerationRecord next = Next(current, GangPhase::kStopping, proposal.reason, now_unix_ms);
        next.commit.restarts = 0;
        next.commit.restarts_by_reason.clear();
        next.last_cause.reset();
        next.started_unix_ms = 0;
        next.restart = proposal.restart;
        next.person_generation = next.commit.generation;
        return next;
      }
      break;
  }
  // A failure of an attempt of generation `base_generation`.
  if (!current || current->commit.phase != GangPhase::kStarting ||
      current->commit.generation != proposal.base_generation) {
    return std::nullopt;
  }
  GenerationRecord next = Next(current, GangPhase::kStopping, proposal.reason, now_unix_ms);
  next.restart = proposal.restart;
  next.counted = proposal.counted;
  GangCause cause;
  cause.worker = proposal.worker;
  cause.failure_class = proposal.failure->failure_class;
  cause.action = proposal.failure->action;
  cause.rule = proposal.failure->rule;
  cause.step = proposal.step;
  cause.counted = proposal.counted;
  next.cause = cause;
  if (cause.action == RecoveryAction::kResetAndRestart) next.commit.reset_class = cause.failure_class;
  return next;
}

std::optional<GenerationRecord> LoseWorker(const GenerationRecord& current, int worker, std::int64_t now_unix_ms) {
  if (current.commit.phase != GangPhase::kStarting) return std::nullopt;
  GenerationRecord next =
      Next(current, GangPhase::kStopping, absl::StrCat("worker ", worker, " lost (its tpud's lease expired)"),
           now_unix_ms);
  next.cause.reset();
  next.last_cause.reset();  // Not back to back any more, as for a lone job after a preemption.
  next.counted = false;
  return next;
}

LeaderStep Decide(const GenerationRecord& record, const std::set<int>& members,
                  const std::map<int, GangReport>& reports, int num_workers, SliceReset reset, double u,
                  std::int64_t now_unix_ms) {
  LeaderStep step;
  if (record.commit.phase != GangPhase::kStopping) return step;
  const std::int64_t generation = record.commit.generation;
  std::vector<std::string> lost, silent, silent_lost;
  const bool report_timed_out = record.stopping_unix_ms > 0 && now_unix_ms - record.stopping_unix_ms >= kReportTimeoutMs;
  std::vector<GangReport> held;
  for (int worker = 0; worker < num_workers; ++worker) {
    const auto report = reports.find(worker);
    const bool reported = report != reports.end() && report->second.generation == generation;
    if (members.count(worker) == 0) {
      lost.push_back(absl::StrCat(worker));
    } else if (!reported) {
      (report_timed_out ? silent_lost : silent).push_back(absl::StrCat(worker));
    }
    if (reported) held.push_back(report->second);
  }
  if (!lost.empty() || !silent.empty() || !silent_lost.empty()) {
    std::vector<std::string> parts;
    if (!silent.empty()) parts.push_back(absl::StrCat(absl::StrJoin(silent, ", "), " to report"));
    if (!silent_lost.empty()) {
      parts.push_back(absl::StrCat(absl::StrJoin(silent_lost, ", "), " lost (no report in ", kReportTimeoutMs / 1000,
                                   " s)"));
      step.report_timed_out = true;
    }
    if (!lost.empty()) parts.push_back(absl::StrCat(absl::StrJoin(lost, ", "), " to come back"));
    step.waiting_for = absl::StrCat("workers ", absl::StrJoin(parts, "; workers "));
    return step;
  }

  GenerationRecord next = record;
  GangCommit& commit = next.commit;
  step.kind = LeaderStep::kCommit;
  const std::optional<GangCause>& cause = record.cause;
  if (cause && cause->action == RecoveryAction::kFail) {
    commit.phase = GangPhase::kFailed;
    commit.reason = absl::StrCat(record.commit.reason, "; ", FailureClassName(cause->failure_class),
                                 " is not fixed by restarting");
    step.next = next;
    return step;
  }
  const std::optional<GangCause>& last = record.last_cause;
  if (cause && last &&
      IsDeterministicRepeat(FailureSeen{cause->failure_class, cause->rule, cause->step},
                            FailureSeen{last->failure_class, last->rule, last->step})) {
    commit.phase = GangPhase::kFailed;
    commit.reason = absl::StrCat(record.commit.reason, "; the same failure twice at step ", *cause->step,
                                 ": deterministic, not restarted");
    step.next = next;
    return step;
  }
  if (record.counted) {
    const std::optional<double> ran_seconds =
        record.started_unix_ms > 0
            ? std::optional<double>(static_cast<double>(record.stopping_unix_ms - record.started_unix_ms) / 1000)
            : std::nullopt;
    const RestartCount count = CountRestart(record.restart, commit.restarts, ran_seconds);
    if (count.reset) commit.restarts_by_reason.clear();
    commit.restarts = count.restarts;
    if (cause) ++commit.restarts_by_reason[FailureClassName(cause->failure_class)];
    if (count.exhausted) {
      commit.phase = GangPhase::kFailed;
      commit.reason = absl::StrCat(record.commit.reason, "; gave up after ", commit.restarts - 1,
                                   " restarts (max_restarts ", record.restart.max_restarts, ")");
      step.next = next;
      return step;
    }
    step.delay = BackoffDelay(record.restart, commit.restarts, u);
  }
  if (commit.reset_class && reset == SliceReset::kSlice && !record.slice_reset_started) {
    step.kind = LeaderStep::kResetSlice;
    step.next = record;  // Counted when the reset is done and this is decided again.
    step.next.slice_reset_started = true;
    step.delay = Seconds(0);
    return step;
  }
  if (commit.reset_class && reset == SliceReset::kNone) {
    commit.reason = absl::StrCat(commit.reason, "; no slice-level reset available");
  }
  commit.phase = GangPhase::kStarting;
  commit.step = CommonStep(held);
  next.started_unix_ms = now_unix_ms;
  step.next = next;
  return step;
}

std::string ConfigConflict(int worker_id, int num_workers, const std::map<int, MemberRecord>& members) {
  std::vector<std::string> why;
  for (const auto& [worker, member] : members) {
    const std::string who = absl::StrCat("worker ", worker, member.host.empty() ? "" : absl::StrCat(" (", member.host, ")"));
    if (member.num_workers > 0 && member.num_workers != num_workers) {
      why.push_back(absl::StrCat(who, " has slice.num_workers ", member.num_workers));
    } else if (worker < 0 || worker >= num_workers) {
      why.push_back(absl::StrCat(who, " is outside 0..", num_workers - 1));
    }
  }
  if (why.empty()) return "";
  return absl::StrCat(absl::StrJoin(why, ", "), "; worker ", worker_id, " (this one) has slice.num_workers ",
                      num_workers, ": the gang cannot start until every worker has the same slice.num_workers");
}

}  // namespace tpud::slice
