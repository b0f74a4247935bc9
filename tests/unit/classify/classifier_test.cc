// The failure classifier's mechanics: user rules, the exit-status and hang
// fallbacks, blocks, line numbers, truncation, sharing. The built-in
// signatures are in classifier_signatures_test.cc, the precedence between
// matching lines in classifier_precedence_test.cc, the real-line corpus in
// classifier_corpus_test.cc.
#include <catch2/catch.hpp>
#include <csignal>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/classify/builtin_rules.h"
#include "daemon/classify/classifier.h"
#include "tests/unit/classify/classifier_test_util.h"

namespace tpud {
namespace {

using testing::ClassifyBlock;
using testing::ClassifyLines;
using testing::ExitCode;
using testing::KilledBy;
using testing::MakeClassifier;

TEST_CASE("Classifier: ordinary training output matches no rule", "[classify]") {
  const std::vector<std::string> lines = {
      "step=100 loss=0.23 lr=3.0e-04 grad_norm=1.12 tokens/s=48211 mfu=0.41",
      "Epoch 1/100",
      "INFO:tensorflow:global_step/sec: 4.21",
      "Dataset shard 3 is temporarily unavailable, retrying in 5s",
      "Metrics endpoint Unavailable; will retry",
      "UNAVAILABLE_DEVICES=none",
      "Saving checkpoint to gs://bucket/run/ckpt-1000 (deadline in 30s)",
      "checking failed shards: 0",
      "F1000 eval score=0.93 at 12:00:01",
      "heartbeat ok (timeout 30s)",
      "WARNING:root:libtpu.so and TPU device found. Setting PJRT_DEVICE=TPU.",
      "Compiling the train step; this may take a few minutes",
      "",
  };
  AttemptScanner scanner(MakeClassifier());
  for (const std::string& line : lines) scanner.ScanLine(line);
  CHECK(scanner.best_match() == nullptr);
  const Classification verdict = scanner.Classify(ExitCode(1), false);
  CHECK(verdict.rule == "exit:code 1");
  CHECK(verdict.failure_class == FailureClass::kUnknown);
}

TEST_CASE("Classifier: HBM OOM followed by the Check failed abort it causes is hbm_oom", "[classify]") {
  const std::string oom =
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
      "Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm.";
  const std::string check = "F0410 12:00:01.123456   31337 tpu_program.cc:88] Check failed: ok";
  const std::string trace = "*** Check failure stack trace: ***";
  for (const auto& lines : {std::vector<std::string>{oom, check, trace},
                            std::vector<std::string>{check, trace, oom}}) {
    const Classification verdict = ClassifyLines(lines, MakeClassifier(), KilledBy(SIGABRT));
    CHECK(verdict.failure_class == FailureClass::kHbmOom);
    CHECK(verdict.action == RecoveryAction::kFail);
    CHECK(verdict.rule == "builtin:hbm_oom");
    CHECK(verdict.matched_line == oom);
  }
}

TEST_CASE("Classifier: a user rule outranks the built-in rules", "[classify]") {
  const auto classifier = MakeClassifier({
      {"DeadlineExceededError", FailureClass::kUserError, RecoveryAction::kFail,
       "this job never times out unless the input pipeline is broken"},
      {R"(loss=nan\b)", FailureClass::kUserError, RecoveryAction::kFail, "loss diverged"},
  });
  REQUIRE(classifier->user_rule_count() == 2);
  REQUIRE(classifier->rules().size() == 2 + BuiltinRules().size());
  CHECK(classifier->rule_id(1) == "user:1");
  CHECK(classifier->rule_id(2) == "builtin:" + BuiltinRules()[0].name);

  const std::string line = "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded";
  Classification verdict = ClassifyLines({line}, classifier);
  CHECK(verdict.rule == "user:0");
  CHECK(verdict.failure_class == FailureClass::kUserError);
  CHECK(verdict.action == RecoveryAction::kFail);
  CHECK(verdict.hint == "this job never times out unless the input pipeline is broken");
  CHECK(verdict.matched_line == line);

  verdict = ClassifyLines({"Check failed: x", "step=9 loss=nan lr=0.1"}, classifier);
  CHECK(verdict.rule == "user:1");
}

// The first line of a burst is its cause, so it is the one reported (it was
// the last line before the burst rules, which made bursts report their consequences).
TEST_CASE("Classifier: after user rule 0 matched, its first line is reported and the line counted",
          "[classify]") {
  const auto classifier = MakeClassifier(
      {{"FATAL-INPUT", FailureClass::kUserError, RecoveryAction::kFail, "bad input"}});
  AttemptScanner scanner(classifier);
  scanner.ScanLine("FATAL-INPUT shard 1");
  scanner.ScanLine("Check failed: x");
  scanner.ScanLine("FATAL-INPUT shard 2");
  scanner.ScanLine("step=3 loss=1.0");
  const Classification verdict = scanner.Classify(KilledBy(SIGABRT), true);
  CHECK(verdict.rule == "user:0");
  CHECK(verdict.matched_line == "FATAL-INPUT shard 1");
  CHECK(verdict.matched_line_number == 1);
  CHECK(scanner.lines_scanned() == 4);
}

TEST_CASE("Classifier: a bad user regex is InvalidArgument naming the rule and RE2's error",
          "[classify]") {
  auto classifier = FailureClassifier::Create({
      {"ok", FailureClass::kCrash, RecoveryAction::kRestart, ""},
      {"also ok", FailureClass::kCrash, RecoveryAction::kRestart, ""},
      {"(abc", FailureClass::kCrash, RecoveryAction::kRestart, ""},
  });
  REQUIRE_FALSE(classifier.ok());
  CHECK(classifier.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(classifier.status().message()) == "failure_rules[2].match: missing ): (abc");

  classifier = FailureClassifier::Create({{"", FailureClass::kCrash, RecoveryAction::kRestart, ""}});
  REQUIRE_FALSE(classifier.ok());
  CHECK(std::string(classifier.status().message()) == "failure_rules[0].match: must not be empty");
}

TEST_CASE("Classifier: with no matching line, the exit status decides", "[classify]") {
  struct Case {
    ExitStatus exit;
    FailureClass failure_class;
    const char* rule;
  };
  ExitStatus spawn_failed;
  spawn_failed.spawn_error = "spawn \"/usr/bin/nope\": No such file or directory";
  const std::vector<Case> cases = {
      {KilledBy(SIGABRT), FailureClass::kCrash, "exit:signal SIGABRT"},
      {KilledBy(SIGSEGV), FailureClass::kCrash, "exit:signal SIGSEGV"},
      {KilledBy(SIGBUS), FailureClass::kCrash, "exit:signal SIGBUS"},
      {KilledBy(SIGILL), FailureClass::kCrash, "exit:signal SIGILL"},
      {KilledBy(SIGFPE), FailureClass::kCrash, "exit:signal SIGFPE"},
      {KilledBy(SIGKILL), FailureClass::kUnknown, "exit:signal SIGKILL"},
      {KilledBy(SIGTERM), FailureClass::kUnknown, "exit:signal SIGTERM"},
      {ExitCode(1), FailureClass::kUnknown, "exit:code 1"},
      {ExitCode(137), FailureClass::kUnknown, "exit:code 137"},
      {ExitCode(0), FailureClass::kUnknown, "exit:code 0"},
      {spawn_failed, FailureClass::kUnknown, "exit:spawn_error"},
  };
  for (const Case& c : cases) {
    INFO(c.rule);
    const Classification verdict = ClassifyLines({"step=1 loss=3.2"}, MakeClassifier(), c.exit);
    CHECK(verdict.rule == c.rule);
    CHECK(verdict.failure_class == c.failure_class);
    CHECK(verdict.action == RecoveryAction::kRestart);
    CHECK(verdict.matched_line.empty());
    CHECK_FALSE(verdict.hint.empty());
  }
}

TEST_CASE("Classifier: a hung attempt with no matching line is hang -> reset_and_restart",
          "[classify]") {
  AttemptScanner scanner(MakeClassifier());
  scanner.ScanLine("step=5 loss=1.9");
  Classification verdict = scanner.Classify(KilledBy(SIGKILL), /*hung=*/true);
  CHECK(verdict.failure_class == FailureClass::kHang);
  CHECK(verdict.action == RecoveryAction::kResetAndRestart);
  CHECK(verdict.rule == "hang");
  CHECK(verdict.matched_line.empty());

  scanner.ScanLine("tensorflow.python.framework.errors_impl.UnavailableError: Socket closed");
  verdict = scanner.Classify(KilledBy(SIGKILL), /*hung=*/true);
  CHECK(verdict.failure_class == FailureClass::kConnection);  // A matched rule beats the hang.
}

TEST_CASE("Classifier: best_match reports the winning rule before the attempt ends", "[classify]") {
  AttemptScanner scanner(MakeClassifier());
  CHECK(scanner.best_match() == nullptr);
  scanner.ScanLine("WARNING:root:Defaulting to PJRT_DEVICE=CPU");
  REQUIRE(scanner.best_match() != nullptr);
  CHECK(scanner.best_match()->failure_class == FailureClass::kCpuFallback);
}

TEST_CASE("Classifier: a huge matched line is cut at a UTF-8 boundary", "[classify]") {
  std::string line = "Check failed: ";
  while (line.size() < 100'000) line += "\xC3\xA9";  // "é", two bytes.
  const Classification verdict = ClassifyLines({line});
  CHECK(verdict.rule == "builtin:crash");
  CHECK(verdict.matched_line.size() <= Classification::kMaxMatchedLineBytes);
  CHECK(verdict.matched_line.size() >= Classification::kMaxMatchedLineBytes - 1);
  CHECK(line.compare(0, verdict.matched_line.size(), verdict.matched_line) == 0);
  CHECK((static_cast<unsigned char>(line[verdict.matched_line.size()]) & 0xC0) != 0x80);
}

TEST_CASE("Classifier: one classifier serves scanners on several threads", "[classify]") {
  const auto classifier = MakeClassifier();
  std::vector<Classification> verdicts(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      AttemptScanner scanner(classifier);
      for (int i = 0; i < 2000; ++i) scanner.ScanLine("step=" + std::to_string(i) + " loss=0.5");
      if (t % 2 == 0) scanner.ScanLine("WARNING:root:Defaulting to PJRT_DEVICE=CPU");
      verdicts[t] = scanner.Classify(ExitCode(1), false);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) {
    CHECK(verdicts[t].rule == (t % 2 == 0 ? "builtin:cpu_fallback" : "exit:code 1"));
  }
}

TEST_CASE("Classifier: class and action names round-trip", "[classify]") {
  for (const char* name : {"deadline_exceeded", "connection", "preemption", "device_busy", "crash",
                           "hang", "hbm_oom", "user_error", "hardware", "cpu_fallback", "unknown"}) {
    const auto parsed = ParseFailureClass(name);
    REQUIRE(parsed.has_value());
    CHECK(std::string(FailureClassName(*parsed)) == name);
  }
  for (const char* name : {"restart", "reset_and_restart", "wait_and_restart", "fail"}) {
    const auto parsed = ParseRecoveryAction(name);
    REQUIRE(parsed.has_value());
    CHECK(std::string(RecoveryActionName(*parsed)) == name);
  }
  CHECK_FALSE(ParseFailureClass("Crash").has_value());
  CHECK_FALSE(ParseFailureClass("").has_value());
  CHECK_FALSE(ParseRecoveryAction("retry").has_value());
}


TEST_CASE("Classifier: a block of lines gets the verdict its lines get one by one", "[classifier]") {
  const std::vector<std::string> lines = {
      "step=100 loss=0.5",
      "E0000 00:00:1700000000.000000 1 tpu_client.cc] DEADLINE_EXCEEDED: Deadline Exceeded",
      "step=101 loss=0.49",
      "Traceback (most recent call last):",
  };
  std::string block;
  for (const std::string& line : lines) block += line + "\n";
  const Classification per_line = ClassifyLines(lines);
  const Classification per_block = ClassifyBlock(block);
  CHECK(per_block.failure_class == per_line.failure_class);
  CHECK(per_block.rule == per_line.rule);
  CHECK(per_block.matched_line == per_line.matched_line);
  CHECK(per_block.matched_line.find('\n') == std::string::npos);
}

TEST_CASE("Classifier: ^ and $ in a rule anchor at line boundaries inside a block", "[classifier]") {
  auto classifier =
      MakeClassifier({{"^FATAL$", FailureClass::kCrash, RecoveryAction::kFail, "user hint"}});
  CHECK_FALSE(classifier->MayMatchLines("ok\nnot FATAL here\nFATAL later\n"));
  CHECK(classifier->MayMatchLines("ok\nFATAL\nmore\n"));
  const Classification verdict = ClassifyBlock("ok\nFATAL\nmore\n", classifier);
  CHECK(verdict.rule == "user:0");
  CHECK(verdict.matched_line == "FATAL");
  CHECK(ClassifyBlock("ok\nnot FATAL here\n", classifier).rule == "exit:code 1");
}

TEST_CASE("Classifier: line numbers count every line, also those of blocks no rule can match",
          "[classifier]") {
  AttemptScanner scanner(MakeClassifier());
  scanner.ScanLines("step=1 loss=2.0\nstep=2 loss=1.9\nstep=3 loss=1.8\n");
  scanner.ScanLine("step=4 loss=1.7");
  scanner.ScanLines("DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: x\nstep=5");  // No final '\n'.
  CHECK(scanner.lines_scanned() == 6);
  const Classification verdict = scanner.Classify(ExitCode(1), false);
  CHECK(verdict.rule == "builtin:coordination_timeout");
  CHECK(verdict.matched_line_number == 5);
}

TEST_CASE("Classifier: line numbers stay exact across long blocks passed over", "[classifier]") {
  std::string block;
  for (int i = 0; i < 5000; ++i) block += "step=" + std::to_string(i % 10) + "\n";  // ~35 KB.
  AttemptScanner scanner(MakeClassifier());
  scanner.ScanLines(block);
  scanner.ScanLines(block.substr(0, 21) + "Socket closed\n");  // 3 lines, then the match.
  CHECK(scanner.lines_scanned() == 5004);
  CHECK(scanner.Classify(ExitCode(1), false).matched_line_number == 5004);
}

TEST_CASE("Classifier: a user rule still sees a line the built-in rules take for a lookalike",
          "[classifier]") {
  const std::string slow =
      "2022-10-15 18:07:41.780474: W external/org_tensorflow/tensorflow/compiler/xla/python/tpu_driver/"
      "client/tpu_client.cc:617] TPU Execute is taking a long time. This might be due to a deadlock "
      "between multiple TPU cores or a very slow program.";
  CHECK(ClassifyLines({slow}).rule == "exit:code 1");
  const auto classifier =
      MakeClassifier({{"taking a long time", FailureClass::kHang, RecoveryAction::kResetAndRestart, ""}});
  CHECK(ClassifyLines({slow}, classifier).rule == "user:0");
}

TEST_CASE("Classifier: a block no rule matches is passed over, text-anchored rules force line by line",
          "[classifier]") {
  auto classifier = MakeClassifier();
  CHECK_FALSE(classifier->MayMatchLines("step=1 loss=2.0\nstep=2 loss=1.9\n"));
  auto anchored = MakeClassifier({{R"(\Aboom\z)", FailureClass::kCrash, RecoveryAction::kFail, ""}});
  CHECK(anchored->MayMatchLines("step=1\n"));  // Cannot tell per block: always a maybe.
  CHECK(ClassifyBlock("step=1\nboom\nstep=2\n", anchored).rule == "user:0");
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Classifier: jobs with the same rules share one classifier, others get their own",
          "[classifier]") {
  const std::vector<FailureRule> rules = {{"boom", FailureClass::kCrash, RecoveryAction::kFail, ""}};
  auto a = FailureClassifier::Shared(rules);
  auto b = FailureClassifier::Shared(rules);
  auto none = FailureClassifier::Shared({});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(none.ok());
  CHECK(a->get() == b->get());
  CHECK(a->get() != none->get());
  CHECK((*none)->user_rule_count() == 0);
  CHECK_FALSE(FailureClassifier::Shared({{"(", FailureClass::kCrash, RecoveryAction::kFail, ""}}).ok());
}

}  // namespace
}  // namespace tpud
