// Each built-in rule on the wording it was written for, one row per public
// source, including wordings that are not in the corpus: format strings of
// the code that prints them, and variants of each family (other status
// styles, prefixes, severities). The real lines jobs printed are scored by
// classifier_corpus_test.cc.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "daemon/classify/builtin_rules.h"
#include "tests/unit/classify/classifier_test_util.h"

namespace tpud {
namespace {

using testing::ClassifyLines;
using testing::MakeClassifier;

struct SignatureCase {
  const char* rule;  // Expected Classification::rule.
  const char* line;
  const char* source;
};

const std::vector<SignatureCase>& SignatureCases() {
  static const auto* cases = new std::vector<SignatureCase>{
      {"builtin:vmem_oom",
       "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:",
       "openxla docs/errors/error_1001.md (the code, on its own line)"},
      {"builtin:vmem_oom",
       "RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while allocating on stack for "
       "ragged_paged_attention",
       "openxla docs/errors/error_1001.md"},
      {"builtin:kernel_halt",
       "Core halted unexpectedly: INTERNAL: Accelerator device halted prematurely, perhaps due to an "
       "on-device check-failure. Node 0 halted unexpectedly at tag:pc TensorCoreSequencer:23:0x292 "
       "(from TensorCoreSequencer:23:0xd74a): BoundsCheck 92 [deref of %s931] for %937 = "
       "dma.hbm_to_vmem [thread:$0]",
       "openxla docs/errors/error_0200.md scenario 3.B"},
      {"builtin:hbm_oom",
       "Compilation failure: Ran out of memory in memory space hbm. Used 12.34G of 8.00G hbm.",
       "google-research/albert#168 (TF1)"},
      {"builtin:hbm_oom",
       "RESOURCE_EXHAUSTED: TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage 174.10G, "
       "exceeding available bytes: 95.74G",
       "openxla docs/errors/error_1000.md"},
      {"builtin:hbm_oom_runtime",
       "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate "
       "8.00M. That was not possible. There are 6.43M free. The largest contiguous region of free "
       "memory is 1.20M due to fragmentation.; (0x0x1_HBM0)",
       "openxla docs/errors/error_0100.md, with the fragmentation variant"},
      {"builtin:hbm_oom_runtime",
       "RuntimeError: Resource exhausted: From /job:tpu_worker/replica:0/task:0: Attempting to "
       "reserve 3.95G at the bottom of memory. That was not possible.",
       "pytorch/xla#1735 (TF1 status style, no \"hbm\")"},
      {"builtin:local_filesystem",
       "tensorflow.python.framework.errors_impl.UnimplementedError: File system scheme '[local]' "
       "not implemented (file: '/home/alice/data/train-00000-of-01024')",
       "Cloud TPU troubleshooting guide"},
      {"builtin:infeed_dtype",
       "TypeError: <dtype: 'string'> is not a supported TPU infeed type. Supported types are: "
       "[tf.float32, tf.int32, tf.complex64, tf.int64, tf.bool, tf.bfloat16]",
       "tensorflow python/tpu/ops/tpu_ops.py"},
      {"builtin:dynamic_shape",
       "ValueError: shape [None, 224, 224, 3] must have a fixed size for dimension 0 that is known "
       "at graph construction time.",
       "tensorflow python/tpu/tpu_sharding.py"},
      {"builtin:unsupported_op",
       "InvalidArgumentError: Compilation failure: Detected unsupported operations when trying to "
       "compile graph cluster_3[] on XLA_TPU_JIT: PyFunc (No registered 'PyFunc' OpKernel for "
       "XLA_TPU_JIT devices compatible with node {{node PyFunc}})",
       "Cloud TPU troubleshooting guide"},
      {"builtin:cross_shard_optimizer",
       "ValueError: CrossShardOptimizer must be used for model training on TPUs.",
       "tensorflow python/tpu/tpu_estimator.py"},
      {"builtin:mosaic_compile",
       "INTERNAL: Mosaic failed to compile TPU kernel: failed to legalize operation 'arith.mulf'",
       "openxla docs/errors/error_2xxx.md"},
      {"builtin:buffer_mismatch",
       "XlaRuntimeError: INVALID_ARGUMENT: Executable(jit_step) expected parameter 7 of size 1024 "
       "(bf16[16,32]{1,0}) but got buffer with incompatible size 2048 (bf16[16,32]{0,1})",
       "openxla docs/errors/error_0102.md"},
      {"builtin:device_mismatch",
       "ValueError: Received incompatible devices for jitted computation. Got argument x of f with "
       "shape float32[8] and device ids [0, 1] on platform TPU",
       "keras-team/keras#18681"},
      {"builtin:topology_config",
       "  (0) Internal: Invalid system configuration: 4x4 host topology with 0 missing hosts, but 2 "
       "hosts in total.",
       "pytorch/xla#3042"},
      {"builtin:preemption",
       "WARNING:tensorflow:TPU node my-tpu reached an unrecoverable state PREEMPTED, terminating the "
       "session now.",
       "tensorflow python/tpu/preempted_hook.py (WARNING)"},
      {"builtin:preemption",
       "W0501 12:00:00.000000 140 preempted_hook.py:92] TPUPollingThread found TPU b'my-tpu' in "
       "state PREEMPTED, and health UNKNOWN.",
       "tensorflow python/tpu/preempted_hook.py (absl glog format)"},
      {"builtin:preemption", "instance/preempted=TRUE",
       "GCE metadata instance/preempted (compute/docs/metadata/predefined-metadata-keys)"},
      {"builtin:preemption", "maintenance-event: TERMINATE_ON_HOST_MAINTENANCE",
       "GCE metadata instance/maintenance-event"},
      {"builtin:device_busy",
       "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: TPU initialization failed: "
       "open(/dev/accel0): Device or resource busy",
       "openxla tpu_initialize_util.cc, /dev/accel form"},
      {"builtin:device_busy",
       "If you are sure no other process is using the TPU, run \"$ sudo rm /tmp/libtpu_lockfile\".",
       "openxla xla/stream_executor/tpu/tpu_initialize_util.cc"},
      {"builtin:hardware",
       "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Core halted unexpectedly: INTERNAL: "
       "Accelerator device halted prematurely, perhaps due to an on-device check-failure. Node 0 "
       "halted unexpectedly at tag:pc TensorCoreSequencer:1:0x1d9 (from TensorCoreSequencer:1:0x1c4): "
       "observed errors are: [Hardware]",
       "openxla docs/errors/error_0200.md scenario 1"},
      {"builtin:hardware", "Detected slice failure, core dump will begin.",
       "marin-community/marin lib/levanter/CODEX_REFACTOR_KV.md"},
      {"builtin:hardware", "jax.errors.JaxRuntimeError: UNAVAILABLE: No TPU Platform available.",
       "jax-ml/jax#13260, newer exception name"},
      {"builtin:node_unhealthy",
       "WARNING:tensorflow:TPUPollingThread found TPU my-tpu in state READY, and health "
       "UNHEALTHY_MAINTENANCE.",
       "tensorflow python/tpu/preempted_hook.py; Cloud TPU API Node.Health"},
      {"builtin:cpu_fallback", "WARNING:root:Defaulting to PJRT_DEVICE=CPU",
       "pytorch/xla torch_xla/_internal/pjrt.py"},
      {"builtin:tpu_unreachable",
       "2023-02-15 17:41:46.158200: E external/org_tensorflow/tensorflow/compiler/xla/python/"
       "tpu_driver/grpc_tpu_driver.cc:1070] Failed to open the gRPC driver: 4: Deadline Exceeded: ",
       "KoboldAI/KoboldAI-Client#235"},
      {"builtin:coordination_timeout",
       "F0101 00:00:00.000000 1 client.h:80] Terminating process because the coordinator detected "
       "missing heartbeats. This most likely indicates that another task died; see the other task "
       "logs for more details.",
       "openxla xla/pjrt/distributed/client.h (older jax)"},
      {"builtin:mesh_rendezvous",
       "RuntimeError: tensorflow/compiler/xla/xla_client/mesh_service.cc:294 : Failed to meet "
       "rendezvous 'loss_reduce': Socket closed (14)",
       "pytorch/xla#2387"},
      {"builtin:connection_lost",
       "INFO:tensorflow:An error was raised while a session was being created. This may be due to a "
       "preemption of a connected worker or parameter server. A new session will be created. Error: "
       "OS Error",
       "tensorflow python/training/monitored_session.py (TF1 wording): connection, not preemption"},
      {"builtin:connection_lost",
       "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with: status = "
       "StatusCode.UNAVAILABLE details = \"failed to connect to all addresses\">",
       "gRPC core"},
      {"builtin:crash", "terminate called after throwing an instance of 'std::runtime_error'",
       "libstdc++ verbose terminate handler"},
      {"builtin:crash", "Segmentation fault (core dumped)", "a shell reporting SIGSEGV"},
      {"builtin:crash", "Fatal Python error: Aborted", "CPython faulthandler"},
      {"builtin:deadline_exceeded",
       "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded",
       "tensorflow errors.DeadlineExceededError"},
      {"builtin:connection",
       "tensorflow.python.framework.errors_impl.UnavailableError: {{function_node "
       "__inference_train_function_1}} Connect Failed",
       "tensorflow errors.UnavailableError"},
      {"builtin:connection",
       "{\"created\":\"@1648699546.241659886\",\"description\":\"Error received from peer\","
       "\"grpc_status\":14}",
       "gRPC JSON status (huggingface/transformers#16509)"},
  };
  return *cases;
}

TEST_CASE("Signatures: each built-in rule classifies the wording of its sources", "[classify]") {
  const auto classifier = MakeClassifier();
  for (const SignatureCase& c : SignatureCases()) {
    INFO(c.source << "\n  " << c.line);
    const Classification verdict = ClassifyLines({"step=7 loss=2.31", c.line}, classifier);
    CHECK(verdict.rule == c.rule);
    CHECK(verdict.matched_line == c.line);
    CHECK(verdict.matched_line_number == 2);
    CHECK_FALSE(verdict.hint.empty());
  }
}

TEST_CASE("Signatures: every built-in rule but the lookalikes has a case, and a hint", "[classify]") {
  std::set<std::string> covered;
  for (const SignatureCase& c : SignatureCases()) covered.insert(c.rule);
  for (const BuiltinRule& builtin : BuiltinRules()) {
    INFO(builtin.name);
    if (builtin.lookalike) {
      CHECK(builtin.rule.failure_class == FailureClass::kUnknown);
      continue;
    }
    CHECK(covered.count("builtin:" + builtin.name) == 1);
    CHECK_FALSE(builtin.rule.hint.empty());
  }
}

TEST_CASE("Signatures: the rules that decide `fail` are exactly the hbm_oom and user_error ones",
          "[classify]") {
  for (const BuiltinRule& builtin : BuiltinRules()) {
    INFO(builtin.name);
    const bool deterministic = builtin.rule.failure_class == FailureClass::kHbmOom ||
                               builtin.rule.failure_class == FailureClass::kUserError;
    CHECK((builtin.rule.action == RecoveryAction::kFail) == deterministic);
    CHECK_FALSE((deterministic && builtin.any_severity));  // A warning never fails a run.
  }
}

}  // namespace
}  // namespace tpud
