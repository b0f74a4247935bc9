// The gang's rules as tables: proposals against the current generation, and
// the leader's decision once every worker reported.
#include "daemon/slice/gang_rules.h"

#include <catch2/catch.hpp>

namespace tpud::slice {
namespace {

constexpr std::int64_t kNow = 1'800'000'000'000;  // Unix ms.

GenerationRecord Record(std::int64_t generation, GangPhase phase, int restarts = 0) {
  GenerationRecord record;
  record.commit.generation = generation;
  record.commit.phase = phase;
  record.commit.reason = "r";
  record.commit.restarts = restarts;
  return record;
}

GangProposal Failure(std::int64_t base, int worker, FailureClass failure_class, RecoveryAction action,
                     std::optional<std::int64_t> step = std::nullopt, bool counted = true) {
  GangProposal proposal;
  proposal.intent = GangProposal::Intent::kRestart;
  proposal.base_generation = base;
  proposal.worker = worker;
  proposal.reason = "worker " + std::to_string(worker) + ": failed";
  Classification failure;
  failure.failure_class = failure_class;
  failure.action = action;
  failure.rule = std::string("builtin:") + FailureClassName(failure_class);
  proposal.failure = failure;
  proposal.step = step;
  proposal.counted = counted;
  proposal.restart.max_restarts = 2;
  proposal.restart.backoff_initial_seconds = 4;
  proposal.restart.backoff_jitter = 0;
  return proposal;
}

GangProposal Person(GangProposal::Intent intent) {
  GangProposal proposal;
  proposal.intent = intent;
  proposal.reason = "requested";
  return proposal;
}

std::map<int, GangReport> Reports(std::int64_t generation, std::vector<std::vector<std::int64_t>> steps) {
  std::map<int, GangReport> reports;
  for (int worker = 0; worker < static_cast<int>(steps.size()); ++worker) {
    reports[worker] = GangReport{worker, generation, steps[worker]};
  }
  return reports;
}

const std::set<int> kAll = {0, 1, 2};

}  // namespace

TEST_CASE("Gang proposals: the first failure of a running generation wins, the rest are moot", "[slice]") {
  const GenerationRecord running = Record(3, GangPhase::kStarting, 1);
  const GangProposal crash = Failure(3, 1, FailureClass::kCrash, RecoveryAction::kRestart, 40);
  const std::optional<GenerationRecord> next = ApplyProposal(running, crash, kNow);
  REQUIRE(next);
  CHECK(next->commit.generation == 4);
  CHECK(next->commit.phase == GangPhase::kStopping);
  CHECK(next->commit.restarts == 1);  // Counted by the leader, once every worker reported.
  CHECK(next->counted);
  REQUIRE(next->cause);
  CHECK(next->cause->worker == 1);
  CHECK(next->cause->step == 40);
  CHECK_FALSE(next->commit.reset_class);
  CHECK(next->stopping_unix_ms == kNow);

  // Another worker failing in the same incident saw generation 3 too: moot now.
  CHECK_FALSE(ApplyProposal(next, Failure(3, 2, FailureClass::kConnection, RecoveryAction::kRestart), kNow));
  // A failure of an attempt from before the running generation: moot.
  CHECK_FALSE(ApplyProposal(running, Failure(2, 0, FailureClass::kCrash, RecoveryAction::kRestart), kNow));
  // A failure while the gang is stopped or failed: moot.
  CHECK_FALSE(ApplyProposal(Record(3, GangPhase::kStopped), crash, kNow));
  CHECK_FALSE(ApplyProposal(Record(3, GangPhase::kFailed), crash, kNow));
  // No record at all (no attempt ever started): moot.
  CHECK_FALSE(ApplyProposal(std::nullopt, crash, kNow));
}

TEST_CASE("Gang proposals: a failure whose action resets the TPU asks for a reset", "[slice]") {
  const std::optional<GenerationRecord> next = ApplyProposal(
      Record(1, GangPhase::kStarting),
      Failure(1, 0, FailureClass::kDeadlineExceeded, RecoveryAction::kResetAndRestart), kNow);
  REQUIRE(next);
  CHECK(next->commit.reset_class == FailureClass::kDeadlineExceeded);
}

TEST_CASE("Gang proposals: a person's start, restart and stop", "[slice]") {
  SECTION("start of a gang that never ran: generation 1, stopping, so every worker reports its steps") {
    const std::optional<GenerationRecord> next = ApplyProposal(std::nullopt, Person(GangProposal::Intent::kStart), kNow);
    REQUIRE(next);
    CHECK(next->commit.generation == 1);
    CHECK(next->commit.phase == GangPhase::kStopping);
    CHECK_FALSE(next->counted);
  }
  SECTION("start while active is moot; start after a stop or failure begins afresh") {
    CHECK_FALSE(ApplyProposal(Record(2, GangPhase::kStarting), Person(GangProposal::Intent::kStart), kNow));
    CHECK_FALSE(ApplyProposal(Record(2, GangPhase::kStopping), Person(GangProposal::Intent::kStart), kNow));
    GenerationRecord failed = Record(5, GangPhase::kFailed, 3);
    failed.commit.restarts_by_reason = {{"crash", 3}};
    failed.cause = GangCause{1, FailureClass::kCrash, RecoveryAction::kRestart, "exit:code 1", 40, true};
    const std::optional<GenerationRecord> next = ApplyProposal(failed, Person(GangProposal::Intent::kStart), kNow);
    REQUIRE(next);
    CHECK(next->commit.generation == 6);
    CHECK(next->commit.restarts == 0);
    CHECK(next->commit.restarts_by_reason.empty());
    CHECK_FALSE(next->last_cause);  // A fresh start forgets the old failure.
  }
  SECTION("restart of a running gang: the next generation with a fresh budget") {
    const std::optional<GenerationRecord> next =
        ApplyProposal(Record(2, GangPhase::kStarting, 2), Person(GangProposal::Intent::kRestart), kNow);
    REQUIRE(next);
    CHECK(next->commit.generation == 3);
    CHECK(next->commit.phase == GangPhase::kStopping);
    CHECK(next->commit.restarts == 0);
  }
  SECTION("stop of an active gang: stopped at the next generation, so running attempts stop; else moot") {
    const std::optional<GenerationRecord> next =
        ApplyProposal(Record(2, GangPhase::kStarting, 1), Person(GangProposal::Intent::kStop), kNow);
    REQUIRE(next);
    CHECK(next->commit.generation == 3);
    CHECK(next->commit.phase == GangPhase::kStopped);
    CHECK(next->commit.restarts == 1);
    CHECK_FALSE(ApplyProposal(*next, Person(GangProposal::Intent::kStop), kNow));
    CHECK_FALSE(ApplyProposal(std::nullopt, Person(GangProposal::Intent::kStop), kNow));
  }
}

TEST_CASE("Gang proposals: a worker leaving on shutdown restarts a running gang, uncounted, budget kept",
          "[slice]") {
  GenerationRecord running = Record(3, GangPhase::kStarting, 2);
  running.commit.restarts_by_reason = {{"crash", 2}};
  GangProposal leave = Person(GangProposal::Intent::kLeave);
  leave.base_generation = 3;
  leave.worker = 1;
  leave.reason = "worker 1 left: tpud received SIGTERM";
  const std::optional<GenerationRecord> next = ApplyProposal(running, leave, kNow);
  REQUIRE(next);
  CHECK(next->commit.generation == 4);
  CHECK(next->commit.phase == GangPhase::kStopping);  // Not kStopped: the gang comes back.
  CHECK(next->commit.reason == "worker 1 left: tpud received SIGTERM");
  CHECK(next->commit.restarts == 2);  // Neither counted nor a fresh budget.
  CHECK(next->commit.restarts_by_reason.at("crash") == 2);
  CHECK_FALSE(next->counted);
  CHECK_FALSE(next->cause);
  // A generation the worker did not see, or a gang not running: moot.
  CHECK_FALSE(ApplyProposal(*next, leave, kNow));
  CHECK_FALSE(ApplyProposal(Record(2, GangPhase::kStopping), leave, kNow));
  CHECK_FALSE(ApplyProposal(Record(3, GangPhase::kStopped), leave, kNow));
  CHECK_FALSE(ApplyProposal(std::nullopt, leave, kNow));

  // Leaving a stopping generation it had reported to: every worker is asked
  // again, and the stop's cause and count carry over unchanged.
  GenerationRecord stopping = Record(3, GangPhase::kStopping, 2);
  stopping.commit.reason = "worker 0: crash: exit code 1";
  stopping.cause = GangCause{0, FailureClass::kCrash, RecoveryAction::kRestart, "exit:code 1", 40, true};
  stopping.counted = true;
  stopping.last_cause = GangCause{2, FailureClass::kHang, RecoveryAction::kRestart, "hang", 20, true};
  const std::optional<GenerationRecord> again = ApplyProposal(stopping, leave, kNow);
  REQUIRE(again);
  CHECK(again->commit.generation == 4);
  CHECK(again->commit.phase == GangPhase::kStopping);
  CHECK(again->commit.reason == "worker 0: crash: exit code 1; worker 1 left: tpud received SIGTERM");
  CHECK(again->counted);
  CHECK(again->cause == stopping.cause);
  CHECK(again->last_cause == stopping.last_cause);  // Not the crash: no false "same failure twice".
  CHECK(again->commit.restarts == 2);
}

TEST_CASE("Gang leader: waits for every worker, then starts all from the newest common step", "[slice]") {
  GenerationRecord stopping = *ApplyProposal(Record(3, GangPhase::kStarting),
                                             Failure(3, 1, FailureClass::kCrash, RecoveryAction::kRestart, 45), kNow);
  SECTION("a worker that has not reported: wait, naming it") {
    const LeaderStep step =
        Decide(stopping, kAll, Reports(4, {{10, 20}, {10, 20}}), 3, SliceReset::kNone, 0.5, kNow + 1000);
    CHECK(step.kind == LeaderStep::kWait);
    CHECK(step.waiting_for == "workers 2 to report");
  }
  SECTION("a member silent past the report timeout is counted lost, and the gang still waits for it") {
    REQUIRE(stopping.stopping_unix_ms == kNow);
    const std::map<int, GangReport> reports = Reports(4, {{10, 20}, {10, 20}});
    const LeaderStep before = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow + kReportTimeoutMs - 1);
    CHECK(before.waiting_for == "workers 2 to report");
    CHECK_FALSE(before.report_timed_out);
    const LeaderStep after = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow + kReportTimeoutMs);
    CHECK(after.kind == LeaderStep::kWait);
    CHECK(after.waiting_for == "workers 2 lost (no report in 300 s)");
    CHECK(after.report_timed_out);
    // Its late report is as good as any: the gang starts.
    CHECK(Decide(stopping, kAll, Reports(4, {{10, 20}, {10, 20}, {20}}), 3, SliceReset::kNone, 0.5,
                 kNow + kReportTimeoutMs + 1)
              .kind == LeaderStep::kCommit);
  }
  SECTION("a report of an older generation does not count") {
    std::map<int, GangReport> reports = Reports(4, {{10}, {10}, {10}});
    reports[2].generation = 3;
    CHECK(Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow).kind == LeaderStep::kWait);
  }
  SECTION("a lost member: wait until it is back, not counted, whatever it reported") {
    const LeaderStep step =
        Decide(stopping, {0, 1}, Reports(4, {{10}, {10}, {10}}), 3, SliceReset::kNone, 0.5, kNow);
    CHECK(step.kind == LeaderStep::kWait);
    CHECK(step.waiting_for == "workers 2 to come back");
  }
  SECTION("all reported: starting, from the newest step every worker holds, with the gang's backoff") {
    const LeaderStep step =
        Decide(stopping, kAll, Reports(4, {{10, 20, 30}, {10, 20}, {20, 30}}), 3, SliceReset::kNone, 0.5, kNow + 7);
    REQUIRE(step.kind == LeaderStep::kCommit);
    CHECK(step.next.commit.phase == GangPhase::kStarting);
    CHECK(step.next.commit.generation == 4);
    CHECK(step.next.commit.step == 20);
    CHECK(step.next.commit.restarts == 1);
    CHECK(step.next.commit.restarts_by_reason.at("crash") == 1);
    CHECK(step.next.started_unix_ms == kNow + 7);
    CHECK(step.delay.count() == Approx(4));  // backoff_initial_seconds, no jitter.
  }
  SECTION("no step in common: from scratch") {
    const LeaderStep step = Decide(stopping, kAll, Reports(4, {{10}, {20}, {}}), 3, SliceReset::kNone, 0.5, kNow);
    REQUIRE(step.kind == LeaderStep::kCommit);
    CHECK_FALSE(step.next.commit.step);
  }
}

TEST_CASE("Gang leader: deterministic failures and the budget fail the whole gang", "[slice]") {
  const std::map<int, GangReport> reports = Reports(4, {{10}, {10}, {10}});
  SECTION("an action of fail (HBM out of memory): failed, not restarted") {
    const GenerationRecord stopping = *ApplyProposal(
        Record(3, GangPhase::kStarting), Failure(3, 2, FailureClass::kHbmOom, RecoveryAction::kFail), kNow);
    const LeaderStep step = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
    REQUIRE(step.kind == LeaderStep::kCommit);
    CHECK(step.next.commit.phase == GangPhase::kFailed);
    CHECK(step.next.commit.reason == "worker 2: failed; hbm_oom is not fixed by restarting");
  }
  SECTION("the same failure at the same step as the generation before: failed") {
    GenerationRecord running = Record(3, GangPhase::kStarting);
    running.cause = GangCause{0, FailureClass::kCrash, RecoveryAction::kRestart, "builtin:crash", 45, true};
    const GenerationRecord stopping =
        *ApplyProposal(running, Failure(3, 1, FailureClass::kCrash, RecoveryAction::kRestart, 45), kNow);
    const LeaderStep step = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
    CHECK(step.next.commit.phase == GangPhase::kFailed);
    CHECK(step.next.commit.reason == "worker 1: failed; the same failure twice at step 45: deterministic, not restarted");
    // At another step it is progress, not a loop: restarted.
    const GenerationRecord later =
        *ApplyProposal(running, Failure(3, 1, FailureClass::kCrash, RecoveryAction::kRestart, 90), kNow);
    CHECK(Decide(later, kAll, reports, 3, SliceReset::kNone, 0.5, kNow).next.commit.phase == GangPhase::kStarting);
  }
  SECTION("one restart over max_restarts: failed; a long run resets the count first") {
    GenerationRecord running = Record(3, GangPhase::kStarting, 2);  // max_restarts is 2 in Failure().
    running.started_unix_ms = kNow - 10'000;
    const GenerationRecord stopping =
        *ApplyProposal(running, Failure(3, 1, FailureClass::kCrash, RecoveryAction::kRestart), kNow);
    const LeaderStep step = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
    CHECK(step.next.commit.phase == GangPhase::kFailed);
    CHECK(step.next.commit.reason == "worker 1: failed; gave up after 2 restarts (max_restarts 2)");

    running.started_unix_ms = kNow - 4'000'000;  // Up longer than reset_after_seconds (3600).
    const GenerationRecord after_long_run =
        *ApplyProposal(running, Failure(3, 1, FailureClass::kCrash, RecoveryAction::kRestart), kNow);
    const LeaderStep restarted = Decide(after_long_run, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
    CHECK(restarted.next.commit.phase == GangPhase::kStarting);
    CHECK(restarted.next.commit.restarts == 1);
  }
  SECTION("a spot slice preempted twice before its next checkpoint restarts, as a lone job does") {
    GenerationRecord running = Record(3, GangPhase::kStarting);
    running.cause = GangCause{0, FailureClass::kPreemption, RecoveryAction::kWaitAndRestart, "notice", 45, false};
    const GenerationRecord stopping = *ApplyProposal(
        running, Failure(3, 0, FailureClass::kPreemption, RecoveryAction::kWaitAndRestart, 45, false), kNow);
    const LeaderStep step = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
    CHECK(step.next.commit.phase == GangPhase::kStarting);
  }
  SECTION("preemption and lost workers do not count") {
    const GenerationRecord preempted =
        *ApplyProposal(Record(3, GangPhase::kStarting, 2),
                       Failure(3, 0, FailureClass::kPreemption, RecoveryAction::kWaitAndRestart, {}, false), kNow);
    const LeaderStep step = Decide(preempted, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
    CHECK(step.next.commit.phase == GangPhase::kStarting);
    CHECK(step.next.commit.restarts == 2);
    CHECK(step.delay.count() == 0);
    const std::optional<GenerationRecord> lost = LoseWorker(Record(3, GangPhase::kStarting, 2), 1, kNow);
    REQUIRE(lost);
    CHECK(lost->commit.reason == "worker 1 lost (its tpud's lease expired)");
    CHECK(Decide(*lost, kAll, reports, 3, SliceReset::kNone, 0.5, kNow).next.commit.restarts == 2);
    CHECK_FALSE(LoseWorker(*lost, 1, kNow));  // A stopping gang waits for it anyway.
  }
}

TEST_CASE("Gang leader: a slice reset happens once, before the restart is counted", "[slice]") {
  const GenerationRecord stopping = *ApplyProposal(
      Record(3, GangPhase::kStarting, 0),
      Failure(3, 0, FailureClass::kDeadlineExceeded, RecoveryAction::kResetAndRestart), kNow);
  const std::map<int, GangReport> reports = Reports(4, {{10}, {10}, {10}});
  const LeaderStep reset = Decide(stopping, kAll, reports, 3, SliceReset::kSlice, 0.5, kNow);
  REQUIRE(reset.kind == LeaderStep::kResetSlice);
  CHECK(reset.next.slice_reset_started);
  CHECK(reset.next.commit.restarts == 0);
  const LeaderStep after = Decide(reset.next, kAll, reports, 3, SliceReset::kSlice, 0.5, kNow);
  REQUIRE(after.kind == LeaderStep::kCommit);
  CHECK(after.next.commit.phase == GangPhase::kStarting);
  CHECK(after.next.commit.restarts == 1);
  // No slice-level reset: restarted without, and said so.
  const LeaderStep none = Decide(stopping, kAll, reports, 3, SliceReset::kNone, 0.5, kNow);
  CHECK(none.next.commit.reason == "worker 0: failed; no slice-level reset available");
  // Each worker reset its own devices before it reported.
  CHECK(Decide(stopping, kAll, reports, 3, SliceReset::kLocal, 0.5, kNow).next.commit.reason == "worker 0: failed");
}

TEST_CASE("Slice records: every field survives etcd's JSON, and garbage is an error", "[slice]") {
  GenerationRecord record = Record(7, GangPhase::kStarting, 2);
  record.commit.step = 120;
  record.commit.reset_class = FailureClass::kHang;
  record.commit.restarts_by_reason = {{"hang", 2}};
  record.cause = GangCause{3, FailureClass::kHang, RecoveryAction::kResetAndRestart, "hang", 118, true};
  record.last_cause = GangCause{1, FailureClass::kCrash, RecoveryAction::kRestart, "exit:code 1", std::nullopt, true};
  record.counted = true;
  record.restart.max_restarts = 9;
  record.started_unix_ms = 5;
  record.stopping_unix_ms = 4;
  record.slice_reset_started = true;
  const absl::StatusOr<GenerationRecord> decoded = DecodeGeneration(EncodeGeneration(record));
  REQUIRE(decoded.ok());
  CHECK(*decoded == record);

  const GangReport report{2, 7, {10, 20}};
  const absl::StatusOr<GangReport> report_back = DecodeReport(EncodeReport(report));
  REQUIRE(report_back.ok());
  CHECK(report_back->steps == report.steps);

  WorkerEvents events;
  events.worker = 3;
  GangEvent crashed;
  crashed.sequence = 41;
  crashed.time_unix_ms = 1700000000123;
  crashed.from = "running";
  crashed.to = "backoff";
  crashed.reason = "crash: Check failed";
  crashed.attempt = 2;
  crashed.exit = ExitStatus{-1, 6, true, ""};
  GangEvent resumed;
  resumed.sequence = 42;
  resumed.from = "backoff";
  resumed.to = "starting";
  resumed.step = 120;
  events.events = {crashed, resumed};
  const absl::StatusOr<WorkerEvents> events_back = DecodeEvents(EncodeEvents(events));
  REQUIRE(events_back.ok());
  CHECK(*events_back == events);
  CHECK(Keys("/tpud", "v4-32").events("train", 3) == "/tpud/slices/v4-32/gangs/train/events/3");
  // A record longer than the bound (another version, or a hand-made key) is cut, not trusted.
  WorkerEvents many;
  many.worker = 1;
  many.events.resize(WorkerEvents::kMaxWorkerEvents + 5);
  CHECK(DecodeEvents(EncodeEvents(many))->events.size() == WorkerEvents::kMaxWorkerEvents);
  CHECK(DecodeEvents(R"({"worker": 1, "events": [{"to": "running"}]})").status().code() ==
        absl::StatusCode::kInvalidArgument);

  CHECK(DecodeGeneration("{not json").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(DecodeGeneration(R"({"generation": 1, "phase": "sideways"})").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(DecodeMember(R"({"host": "h"})").status().code() == absl::StatusCode::kInvalidArgument);

  const Keys keys("/tpud", "v4-32");
  CHECK(keys.member(3) == "/tpud/slices/v4-32/members/3");
  CHECK(keys.MemberOf("/tpud/slices/v4-32/members/3") == 3);
  CHECK_FALSE(keys.MemberOf("/tpud/slices/v4-32/members/x"));
  CHECK(keys.GangKeyOf(keys.report("train", 2)) == std::make_pair(std::string("train"), std::string("reports/2")));
  CHECK_FALSE(keys.GangKeyOf(keys.leader()));
}

TEST_CASE("Slice shape: members that disagree on num_workers, or hold an id outside it, are a conflict",
          "[slice]") {
  const auto member = [](int worker, int num_workers) {
    MemberRecord m;
    m.worker = worker;
    m.host = "host-" + std::to_string(worker);
    m.num_workers = num_workers;
    return m;
  };
  CHECK(ConfigConflict(0, 2, {{0, member(0, 2)}, {1, member(1, 2)}}).empty());
  CHECK(ConfigConflict(0, 2, {{0, member(0, 2)}, {1, member(1, 0)}}).empty());  // An older tpud: unknown.
  const std::string differs = ConfigConflict(0, 2, {{0, member(0, 2)}, {1, member(1, 3)}});
  CHECK_THAT(differs, Catch::Matchers::Contains("worker 1 (host-1) has slice.num_workers 3"));
  CHECK_THAT(differs, Catch::Matchers::Contains("worker 0 (this one) has slice.num_workers 2"));
  CHECK_THAT(ConfigConflict(1, 2, {{1, member(1, 2)}, {2, member(2, 0)}}),
             Catch::Matchers::Contains("worker 2 (host-2) is outside 0..1"));
  // The member record carries it through etcd.
  absl::StatusOr<MemberRecord> decoded = DecodeMember(EncodeMember(member(1, 4)));
  REQUIRE(decoded.ok());
  CHECK(decoded->num_workers == 4);
}

TEST_CASE("Gang proposals: when etcd lost the gang's record, a proposal goes on from the proposer's generation",
          "[slice]") {
  const GangProposal crash = Failure(5, 0, FailureClass::kCrash, RecoveryAction::kRestart);
  // Wiped: no record. Without the basis the failure would be moot for good.
  CHECK_FALSE(ApplyProposal(std::nullopt, crash, 1000).has_value());
  const std::optional<GenerationRecord> basis = ProposalBasis(std::nullopt, crash);
  REQUIRE(basis.has_value());
  CHECK(basis->commit.generation == 5);
  CHECK(basis->commit.phase == GangPhase::kStarting);
  const std::optional<GenerationRecord> next = ApplyProposal(basis, crash, 1000);
  REQUIRE(next.has_value());
  CHECK(next->commit.generation == 6);  // Above every worker's: they all follow it.
  CHECK(next->commit.phase == GangPhase::kStopping);

  // Restored from an older snapshot: generation 2 there.
  GenerationRecord old = Record(2, GangPhase::kStarting);
  CHECK(ProposalBasis(old, crash)->commit.generation == 5);
  // A person's stop reaches a gang etcd forgot; a start of a stopped one too.
  GangProposal stop = Person(GangProposal::Intent::kStop);
  stop.base_generation = 5;
  CHECK(ApplyProposal(ProposalBasis(std::nullopt, stop), stop, 1000)->commit.phase == GangPhase::kStopped);
  GangProposal start = Person(GangProposal::Intent::kStart);
  start.base_generation = 5;
  CHECK(ApplyProposal(ProposalBasis(std::nullopt, start), start, 1000)->commit.generation == 6);
  // etcd up to date: nothing changes.
  old.commit.generation = 5;
  CHECK(ProposalBasis(old, crash) == std::optional<GenerationRecord>(old));
}

TEST_CASE("Attempt records: what fences a worker id travels through etcd intact", "[slice]") {
  AttemptRecord record{1, "host-a", "/var/lib/tpud", 4242, 3, 7, 1700000000000};
  absl::StatusOr<AttemptRecord> decoded = DecodeAttempt(EncodeAttempt(record));
  REQUIRE(decoded.ok());
  CHECK(*decoded == record);
  CHECK_FALSE(DecodeAttempt("{}").ok());  // No worker: refused, named.
  Keys keys("/tpud", "s");
  CHECK(keys.GangKeyOf(keys.attempt("train", 1)) == std::make_pair(std::string("train"), std::string("attempts/1")));
}

TEST_CASE("Gang proposals: a stop sent again after a person's later start is moot, and a lost worker breaks a repeat",
          "[slice]") {
  GangProposal start = Person(GangProposal::Intent::kStart);
  start.base_generation = 4;
  const std::optional<GenerationRecord> started = ApplyProposal(Record(4, GangPhase::kStopped), start, 1000);
  REQUIRE(started);
  CHECK(started->person_generation == 5);
  GangProposal old_stop = Person(GangProposal::Intent::kStop);
  old_stop.base_generation = 3;  // Made before the start, replayed after it.
  CHECK_FALSE(ApplyProposal(started, old_stop, 1000).has_value());
  GangProposal new_stop = old_stop;
  new_stop.base_generation = 5;
  CHECK(ApplyProposal(started, new_stop, 1000).has_value());
  CHECK(DecodeGeneration(EncodeGeneration(*started))->person_generation == 5);

  GenerationRecord running = Record(7, GangPhase::kStarting);
  running.cause = GangCause{0, FailureClass::kCrash, RecoveryAction::kRestart, "builtin:crash", 45, true};
  const std::optional<GenerationRecord> lost = LoseWorker(running, 1, 1000);
  REQUIRE(lost);
  CHECK_FALSE(lost->last_cause.has_value());  // A crash at 45 after this is not "the same failure twice".
}

}  // namespace tpud::slice
