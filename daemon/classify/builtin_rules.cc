#include "daemon/classify/builtin_rules.h"

namespace tpud {
namespace {

using FC = FailureClass;
using RA = RecoveryAction;

struct RuleSpec {
  const char* name;
  const char* match;
  FC failure_class;
  RA action;
  const char* hint;
};

// Priority order: earlier entries win. Each cites the source of its strings.
constexpr RuleSpec kRuleSpecs[] = {
    // tensorflow training/monitored_session.py logs "This may be due to a
    // preemption in a connected worker or parameter server" (TF1 wording: "of a
    // connected worker") when a session dies of UnavailableError/AbortedError.
    // tensorflow tpu/preempted_hook.py logs "TPU node %s reached an unrecoverable
    // state %s" for node state PREEMPTED or TERMINATED.
    {"preemption",
     R"(This may be due to a preemption (?:in|of) a connected worker|)"
     R"(reached an unrecoverable state (?:PREEMPTED|TERMINATED))",
     FC::kPreemption, RA::kWaitAndRestart,
     "the TPU node or a connected worker was preempted: wait until the node is READY "
     "(start it if it is STOPPED or PREEMPTED), then restart from the newest checkpoint"},

    // openxla docs/errors/error_1000.md (E1000, compile-time HBM OOM), samples:
    // "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in
    // memory space hbm. Used 49.34G of 32.00G hbm." and "RESOURCE_EXHAUSTED: TPU
    // TensorCore Hbm usage: 34.82G, SparseCore Hbm usage 174.10G, exceeding
    // available bytes: 95.74G".
    {"hbm_oom",
     R"(Ran out of memory in memory space hbm|)"
     R"(RESOURCE_EXHAUSTED: XLA:TPU compile permanent error|)"
     R"(TensorCore Hbm usage: .*exceeding available bytes)",
     FC::kHbmOom, RA::kFail,
     "the program does not fit in TPU HBM: reduce the batch size, use bfloat16, or use "
     "fewer/smaller layers or shard the parameters; see https://openxla.org/xla/errors/error_1000"},

    // openxla docs/errors/error_0100.md (E0100, runtime buffer allocation failure):
    // "RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate
    // 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)". The
    // runtime has already retried and defragmented; the doc says it needs user action.
    {"hbm_oom_runtime", R"(RESOURCE_EXHAUSTED: Error allocating device buffer)",
     FC::kHbmOom, RA::kFail,
     "a TPU buffer allocation ran out of HBM at run time: reduce the batch size or the "
     "arrays kept on the device; see https://openxla.org/xla/errors/error_0100"},

    // Cloud TPU troubleshooting guide (TensorFlow): "Unimplemented: File system
    // scheme '[local]' not implemented" — the TPU cannot read the VM's local files.
    {"local_filesystem", R"(File system scheme '\[local\]' not implemented)",
     FC::kUserError, RA::kFail,
     "the TPU cannot read local files: put the input data and model directory in a "
     "Cloud Storage bucket (gs://...)"},

    // tensorflow tpu/ops/tpu_ops.py: "<dtype> is not a supported TPU infeed type.
    // Supported types are: [...]".
    {"infeed_dtype", R"(is not a supported TPU infeed type)", FC::kUserError, RA::kFail,
     "an input tensor has a type the TPU infeed does not take: cast it to float32, int32, "
     "bfloat16 or bool in the input pipeline"},

    // tensorflow tpu/tpu_sharding.py: "shape [None, 224, 224, 3] must have a fixed
    // size for dimension 0 that is known at graph construction time."; the XLA
    // bridge: "... must be a compile-time constant" (troubleshooting guide).
    {"dynamic_shape", R"(must have a fixed size for dimension|must be a compile-time constant)",
     FC::kUserError, RA::kFail,
     "TPU programs need static shapes: batch with drop_remainder=True and pad variable-length "
     "inputs to fixed sizes"},

    // TF/XLA bridge: "Detected unsupported operations when trying to compile graph
    // ... on XLA_TPU_JIT: PyFunc (No registered 'PyFunc' OpKernel for XLA_TPU_JIT
    // devices compatible with node ...)" (troubleshooting guide).
    {"unsupported_op", R"(OpKernel for XLA_TPU_JIT devices)", FC::kUserError, RA::kFail,
     "the model uses an op with no TPU kernel (named in the line): replace it, or move it out "
     "of the TPU computation into the host input pipeline"},

    // tensorflow tpu/tpu_estimator.py: "CrossShardOptimizer must be used for model
    // training on TPUs."
    {"cross_shard_optimizer", R"(CrossShardOptimizer must be used)", FC::kUserError, RA::kFail,
     "TPUEstimator training needs the optimizer wrapped in "
     "tf.compat.v1.tpu.CrossShardOptimizer"},

    // openxla xla/stream_executor/tpu/tpu_initialize_util.cc: "The TPU is already
    // in use by process with pid <N>. Not attempting to load libtpu.so in this
    // process." and the lock at /tmp/libtpu_lockfile; older libtpu (jax-ml/jax#10192):
    // "libtpu.so already in use by another process probably owned by another user";
    // vfio devices: "Couldn't open iommu group /dev/vfio/0".
    {"device_busy",
     R"(The TPU is already in use by process|libtpu\.so already in use by another process|)"
     R"(Couldn't open iommu group|libtpu_lockfile)",
     FC::kDeviceBusy, RA::kResetAndRestart,
     "another process holds the TPU, or a dead one left /tmp/libtpu_lockfile: stop the "
     "processes holding /dev/accel* or /dev/vfio/*, remove the stale lock, then restart"},

    // openxla docs/errors/error_0200.md (E0200, core halted): "INTERNAL: Accelerator
    // device halted prematurely, perhaps due to an on-device check-failure. Node 0
    // halted unexpectedly at tag:pc ..."; "observed errors are: [Hardware]"
    // ([Network], [Power]) marks an infrastructure fault. TF1 wording
    // (tensorflow/tpu#785): "Core halted unexpectedly:".
    {"hardware",
     R"(Accelerator device halted prematurely|Core halted unexpectedly|)"
     R"(observed errors are: \[(?:Hardware|Network|Power)\])",
     FC::kHardware, RA::kResetAndRestart,
     "a TPU core halted: reset and restart, and drain the host if it repeats there; [User], "
     "BoundsCheck or scheck* in the message mean a program/kernel bug instead; see "
     "https://openxla.org/xla/errors/error_0200"},

    // tensorflow errors.DeadlineExceededError; absl/gRPC status DEADLINE_EXCEEDED
    // and its message "Deadline Exceeded"; the coordination service's "Barrier
    // timed out" and "Task /job:jax_worker/replica:0/task:0 heartbeat timeout"
    // (jax-ml/jax#23599).
    {"deadline_exceeded",
     R"(DeadlineExceededError|DEADLINE_EXCEEDED|Deadline Exceeded|Barrier timed out|)"
     R"(heartbeat timeout)",
     FC::kDeadlineExceeded, RA::kResetAndRestart,
     "a collective, barrier or RPC deadline passed (a worker is slow, hung or gone): reset the "
     "TPU, then restart from the newest checkpoint"},

    // gRPC status UNAVAILABLE (code 14) as a status word — `StatusCode.UNAVAILABLE`,
    // `UNAVAILABLE: ...` — never the English word "unavailable"; gRPC core
    // "failed to connect to all addresses", "Socket closed"; tensorflow
    // errors.UnavailableError.
    {"connection",
     R"(\bUNAVAILABLE\b|UnavailableError|failed to connect to all addresses|Socket closed)",
     FC::kConnection, RA::kRestart,
     "lost the connection to a TPU worker or the coordinator (gRPC UNAVAILABLE): restarting; "
     "if it repeats, check the TPU node's health and reset it"},

    // pytorch/xla torch_xla/_internal/pjrt.py: "Defaulting to PJRT_DEVICE=CPU";
    // jax xla_bridge (jax-ml/jax#10192, #22070): "No GPU/TPU found, falling back to
    // CPU." and "A Google TPU may be present on this machine, but either a
    // TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu."
    {"cpu_fallback",
     R"(Defaulting to PJRT_DEVICE=CPU|No GPU/TPU found, falling back to CPU|)"
     R"(TPU may be present on this machine, but)",
     FC::kCpuFallback, RA::kRestart,
     "the framework found no usable TPU and fell back to the CPU: set PJRT_DEVICE=TPU "
     "(torch_xla) or TPU_NAME / JAX_PLATFORMS, and check that libtpu is installed"},

    // absl/glog CHECK failures: "Check failed: ..." and "*** Check failure stack
    // trace: ***"; absl fatal log lines "F0000 00:00:1717141650.890307    9276
    // pjrt_computation_client.cc:487] ..." (pytorch/xla#7138) or glog's
    // "F1115 21:16:04.142176 3416 file.cc:12] ...", also glued to a progress bar
    // drawn without a newline ("1.21s/it]F0000 ..."); absl's failure signal handler
    // "*** SIGSEGV (@0x10), see gl__________43#s15 received by PID 2260154"
    // (jax-ml/jax#13043).
    {"crash",
     R"(Check failed|\*\*\* Check failure stack trace|)"
     R"(\bF\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] |)"
     R"(\*\*\* SIG[A-Z]+ .*received by PID)",
     FC::kCrash, RA::kRestart,
     "the trainer crashed (CHECK failure or fatal error): restarting from the newest "
     "checkpoint; if it crashes again at the same step, the failure is deterministic"},
};

}  // namespace

const std::vector<BuiltinRule>& BuiltinRules() {
  static const std::vector<BuiltinRule>* const rules = [] {
    auto* built = new std::vector<BuiltinRule>();
    for (const RuleSpec& spec : kRuleSpecs) {
      built->push_back({spec.name, FailureRule{spec.match, spec.failure_class, spec.action,
                                               spec.hint}});
    }
    return built;
  }();
  return *rules;
}

}  // namespace tpud
