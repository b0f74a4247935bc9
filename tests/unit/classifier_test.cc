// The failure classifier: built-in signatures on real Cloud TPU error lines,
// rule priority, user rules, and the exit-status / hang fallbacks.
#include <catch2/catch.hpp>
#include <csignal>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/classify/builtin_rules.h"
#include "daemon/classify/classifier.h"

namespace tpud {
namespace {

std::shared_ptr<const FailureClassifier> MakeClassifier(std::vector<FailureRule> user_rules = {}) {
  auto classifier = FailureClassifier::Create(std::move(user_rules));
  REQUIRE(classifier.ok());
  return *classifier;
}

ExitStatus ExitCode(int code) {
  ExitStatus status;
  status.code = code;
  return status;
}

ExitStatus KilledBy(int signal) {
  ExitStatus status;
  status.signal = signal;
  return status;
}

Classification ClassifyLines(const std::vector<std::string>& lines,
                             std::shared_ptr<const FailureClassifier> classifier = MakeClassifier(),
                             const ExitStatus& exit = ExitCode(1)) {
  AttemptScanner scanner(std::move(classifier));
  for (const std::string& line : lines) scanner.ScanLine(line);
  return scanner.Classify(exit, /*hung=*/false);
}

struct SignatureCase {
  const char* rule;  // Expected Classification::rule.
  FailureClass failure_class;
  RecoveryAction action;
  const char* line;
};

// Real error lines (sources: ../shared/reference/cloud-tpu.md §4-5 and the
// citations in daemon/classify/builtin_rules.cc).
const std::vector<SignatureCase>& SignatureCases() {
  using FC = FailureClass;
  using RA = RecoveryAction;
  static const auto* cases = new std::vector<SignatureCase>{
      {"builtin:preemption", FC::kPreemption, RA::kWaitAndRestart,
       "INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker "
       "or parameter server. The current session will be closed and a new session will be created."},
      {"builtin:preemption", FC::kPreemption, RA::kWaitAndRestart,
       "INFO:tensorflow:An error was raised while a session was being created. This may be due to a "
       "preemption of a connected worker or parameter server. A new session will be created. Error: "
       "OS Error"},
      {"builtin:preemption", FC::kPreemption, RA::kWaitAndRestart,
       "WARNING:tensorflow:TPU node my-tpu reached an unrecoverable state PREEMPTED, terminating the "
       "session now."},
      {"builtin:hbm_oom", FC::kHbmOom, RA::kFail,
       "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
       "Ran out of memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by "
       "17.34G."},
      {"builtin:hbm_oom", FC::kHbmOom, RA::kFail,
       "RESOURCE_EXHAUSTED: TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage 174.10G, "
       "exceeding available bytes: 95.74G"},
      {"builtin:hbm_oom_runtime", FC::kHbmOom, RA::kFail,
       "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate "
       "8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)"},
      {"builtin:local_filesystem", FC::kUserError, RA::kFail,
       "tensorflow.python.framework.errors_impl.UnimplementedError: File system scheme '[local]' "
       "not implemented (file: '/home/alice/data/train-00000-of-01024')"},
      {"builtin:infeed_dtype", FC::kUserError, RA::kFail,
       "TypeError: <dtype: 'string'> is not a supported TPU infeed type. Supported types are: "
       "[tf.float32, tf.int32, tf.complex64, tf.int64, tf.bool, tf.bfloat16]"},
      {"builtin:dynamic_shape", FC::kUserError, RA::kFail,
       "ValueError: shape [None, 224, 224, 3] must have a fixed size for dimension 0 that is known "
       "at graph construction time."},
      {"builtin:dynamic_shape", FC::kUserError, RA::kFail,
       "tensorflow.python.framework.errors_impl.InvalidArgumentError: Compilation failure: Input 1 "
       "to node `model/Reshape` with op Reshape must be a compile-time constant."},
      {"builtin:unsupported_op", FC::kUserError, RA::kFail,
       "tensorflow.python.framework.errors_impl.InvalidArgumentError: Compilation failure: Detected "
       "unsupported operations when trying to compile graph cluster_3_10943035373880407667[] on "
       "XLA_TPU_JIT: SparseSoftmax (No registered 'SparseSoftmax' OpKernel for XLA_TPU_JIT devices "
       "compatible with node {{node model/attn/SparseSoftmax}})"},
      {"builtin:cross_shard_optimizer", FC::kUserError, RA::kFail,
       "ValueError: CrossShardOptimizer must be used for model training on TPUs."},
      {"builtin:device_busy", FC::kDeviceBusy, RA::kResetAndRestart,
       "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by "
       "process with pid 2718466. Not attempting to load libtpu.so in this process. (set "
       "JAX_PLATFORMS='' to automatically choose an available backend)"},
      {"builtin:device_busy", FC::kDeviceBusy, RA::kResetAndRestart,
       "I0000 00:00:1649423660.053391 1924758 f236.cc:165] libtpu.so already in use by another "
       "process probably owned by another user. Run \"$ sudo lsof -w /dev/accel0\" to figure out "
       "which process is using the TPU. Not attempting to load libtpu.so in this process."},
      {"builtin:device_busy", FC::kDeviceBusy, RA::kResetAndRestart,
       "If you are sure no other process is using the TPU, run \"$ sudo rm /tmp/libtpu_lockfile\"."},
      {"builtin:device_busy", FC::kDeviceBusy, RA::kResetAndRestart,
       "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: TPU initialization failed: "
       "open(/dev/vfio/0): Device or resource busy; Couldn't open iommu group /dev/vfio/0"},
      {"builtin:hardware", FC::kHardware, RA::kResetAndRestart,
       "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Core halted unexpectedly: INTERNAL: "
       "Accelerator device halted prematurely, perhaps due to an on-device check-failure. Node 0 "
       "halted unexpectedly at tag:pc TensorCoreSequencer:1:0x1d9 (from "
       "TensorCoreSequencer:1:0x1c4): observed errors are: [Hardware]"},
      // An absl fatal line, but the halt decides: hardware outranks crash.
      {"builtin:hardware", FC::kHardware, RA::kResetAndRestart,
       "F0000 00:00:1717141650.890307    9276 pjrt_computation_client.cc:487] Non-OK-status: status "
       "status: INTERNAL: Core halted unexpectedly: INTERNAL: Accelerator device halted prematurely, "
       "perhaps due to an on-device check-failure. Node 0 halted unexpectedly at tag:pc "
       "TensorCoreSequencer:887:0x6f1"},
      {"builtin:hardware", FC::kHardware, RA::kResetAndRestart,
       "ERROR:tensorflow:Error recorded from training_loop: From /job:worker/replica:0/task:0: Core "
       "halted unexpectedly:"},
      {"builtin:deadline_exceeded", FC::kDeadlineExceeded, RA::kResetAndRestart,
       "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded"},
      {"builtin:deadline_exceeded", FC::kDeadlineExceeded, RA::kResetAndRestart,
       "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
       "PjRT_Client_Connect. Timed out task names: /job:jax_worker/replica:0/task:1"},
      // Says UNAVAILABLE too, but a heartbeat timeout is a deadline (reset first).
      {"builtin:deadline_exceeded", FC::kDeadlineExceeded, RA::kResetAndRestart,
       "2024-10-09 15:47:38.568412: E external/xla/xla/tsl/distributed_runtime/coordination/"
       "coordination_service.cc:1170] /job:jax_worker/replica:0/task:0 has been set to ERROR in "
       "coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:0 heartbeat timeout. "
       "This indicates that the remote task has failed, got preempted, or crashed unexpectedly."},
      {"builtin:connection", FC::kConnection, RA::kRestart,
       "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with: status = "
       "StatusCode.UNAVAILABLE details = \"failed to connect to all addresses\">"},
      {"builtin:connection", FC::kConnection, RA::kRestart,
       "tensorflow.python.framework.errors_impl.UnavailableError: Socket closed"},
      {"builtin:connection", FC::kConnection, RA::kRestart,
       "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: Connection reset by peer"},
      {"builtin:cpu_fallback", FC::kCpuFallback, RA::kRestart,
       "WARNING:root:Defaulting to PJRT_DEVICE=CPU"},
      {"builtin:cpu_fallback", FC::kCpuFallback, RA::kRestart,
       "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun "
       "for more info.)"},
      {"builtin:cpu_fallback", FC::kCpuFallback, RA::kRestart,
       "WARNING:2024-06-25 00:34:55,143:jax._src.xla_bridge:940: A Google TPU may be present on "
       "this machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling back to "
       "cpu."},
      {"builtin:crash", FC::kCrash, RA::kRestart,
       "F0410 12:00:01.123456   31337 tpu_compile_op.cc:55] Check failed: shape.rank() == 2 (3 vs. 2)"},
      {"builtin:crash", FC::kCrash, RA::kRestart, "*** Check failure stack trace: ***"},
      {"builtin:crash", FC::kCrash, RA::kRestart,
       "F0000 00:00:1708382221.197251   23274 pjrt_registry.cc:117] Non-OK-status: "
       "pjrt::LoadPjrtPlugin(\"tpu\", tpu_library_path).status() status: ALREADY_EXISTS: PJRT_Api "
       "already exists for device type tpu"},
      {"builtin:crash", FC::kCrash, RA::kRestart,
       "  0%|          | 1/7800 [00:01<2:37:37,  1.21s/it]F0000 00:00:1717141650.890307    9276 "
       "pjrt_computation_client.cc:487] Non-OK-status: status status: INTERNAL: invalid program"},
      {"builtin:crash", FC::kCrash, RA::kRestart,
       "*** SIGSEGV (@0x10), see gl__________43#s15 received by PID 2260154 (TID 2260154) on cpu "
       "10; stack trace: ***"},
  };
  return *cases;
}

TEST_CASE("Classifier: each built-in signature classifies its real error line", "[classify]") {
  const auto classifier = MakeClassifier();
  for (const SignatureCase& c : SignatureCases()) {
    INFO(c.line);
    const Classification verdict = ClassifyLines({"step=7 loss=2.31", c.line}, classifier);
    CHECK(verdict.rule == c.rule);
    CHECK(FailureClassName(verdict.failure_class) == std::string(FailureClassName(c.failure_class)));
    CHECK(RecoveryActionName(verdict.action) == std::string(RecoveryActionName(c.action)));
    CHECK(verdict.matched_line == c.line);
    CHECK_FALSE(verdict.hint.empty());
  }
}

TEST_CASE("Classifier: every built-in rule has a real-line test case", "[classify]") {
  std::set<std::string> covered;
  for (const SignatureCase& c : SignatureCases()) covered.insert(c.rule);
  for (const BuiltinRule& builtin : BuiltinRules()) {
    INFO(builtin.name);
    CHECK(covered.count("builtin:" + builtin.name) == 1);
  }
}

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

TEST_CASE("Classifier: a more important rule seen later wins, the winner's last line is reported",
          "[classify]") {
  const Classification verdict = ClassifyLines({
      "E0410 grpc: UNAVAILABLE: failed to connect to all addresses",
      "DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: first",
      "E0410 grpc: UNAVAILABLE: Socket closed",
      "DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: second",
      "step=101 loss=0.22",
  });
  CHECK(verdict.failure_class == FailureClass::kDeadlineExceeded);
  CHECK(verdict.matched_line == "DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: second");
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

TEST_CASE("Classifier: after rule 0 matched, its last matching line is still reported", "[classify]") {
  const auto classifier = MakeClassifier(
      {{"FATAL-INPUT", FailureClass::kUserError, RecoveryAction::kFail, "bad input"}});
  AttemptScanner scanner(classifier);
  scanner.ScanLine("FATAL-INPUT shard 1");
  scanner.ScanLine("Check failed: x");
  scanner.ScanLine("FATAL-INPUT shard 2");
  scanner.ScanLine("step=3 loss=1.0");
  const Classification verdict = scanner.Classify(KilledBy(SIGABRT), true);
  CHECK(verdict.rule == "user:0");
  CHECK(verdict.matched_line == "FATAL-INPUT shard 2");
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


// What launchers deliver: blocks of lines, each ending in '\n'.
Classification ClassifyBlock(const std::string& block,
                             std::shared_ptr<const FailureClassifier> classifier = MakeClassifier()) {
  AttemptScanner scanner(std::move(classifier));
  scanner.ScanLines(block);
  return scanner.Classify(ExitCode(1), /*hung=*/false);
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
