// hbm_oom and user_error: the failures that restarting cannot fix, so their
// action is `fail` and a wrong match costs a whole run. Each pattern is the
// wording of one deterministic failure and nothing broader: a bare
// RESOURCE_EXHAUSTED (also a host OOM, a gRPC message-size limit or a quota)
// or a bare INVALID_ARGUMENT is left to the restart classes, and the "same
// failure at the same step twice" rule catches what repeats.
#include "daemon/classify/builtin_rule_specs.h"

namespace tpud::builtin_rules {
namespace {

constexpr RuleSpec kRules[] = {
    // openxla docs/errors/error_1001.md (E1001, compile-time scoped Vmem OOM):
    // "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in memory space
    // vmem while allocating on stack for ... exceeded scoped vmem limit by 3.85M" and
    // "Allocation (size=134217728) would exceed memory (size=67108864) :: #allocation25 [...,
    // space=vmem, ...]"; pytorch/xla#9524: "XLA:TPU compile permanent error. Ran out of memory in
    // memory space vmem". Not HBM: a kernel's blocks do not fit the on-core vector memory, and
    // the same compile fails every time. First, because such a line may also say "compile
    // permanent error".
    {"vmem_oom",
     R"(Ran out of memory in memory space [vs]mem|CompileTimeScopedVmemOom|)"
     R"(exceeded scoped vmem limit|would exceed memory \(size=\d+\) :: .*space=vmem)",
     FC::kUserError, RA::kFail, kCause, false, false,
     "a kernel's scratch buffers do not fit in the TPU core's vector memory (VMEM): use smaller "
     "block sizes in the Pallas/Mosaic kernel or raise vmem_limit_bytes; see "
     "https://openxla.org/xla/errors/error_1001"},

    // openxla docs/errors/error_0200.md, scenarios 3.B and 3.C: the core halted on the program's
    // own fault, "... Semaphore (scratch argument 1) has a nonzero value upon exit from a Mosaic
    // kernel. Make sure every DMA is awaited, and every semaphore signal is paired with a wait."
    // and "BoundsCheck 92 [deref of %s931] for %937 = dma.hbm_to_vmem ...". Before `hardware`:
    // the same line says "Core halted unexpectedly".
    {"kernel_halt",
     R"(upon exit from a Mosaic kernel|Make sure every DMA is awaited|BoundsCheck \d+ \[deref)",
     FC::kUserError, RA::kFail, kCause, false, false,
     "the TPU core halted on the program's own fault (a Pallas/Mosaic kernel left a DMA or "
     "semaphore unawaited, or indexed out of bounds): fix the kernel; see "
     "https://openxla.org/xla/errors/error_0200"},

    // openxla docs/errors/error_1000.md (E1000, compile-time HBM OOM): "RESOURCE_EXHAUSTED:
    // XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 49.34G of
    // 32.00G hbm." and "TPU TensorCore Hbm usage: 34.82G, SparseCore Hbm usage 174.10G,
    // exceeding available bytes: 95.74G"; TF1 (google-research/albert#168): "Compilation failure:
    // Ran out of memory in memory space hbm."
    {"hbm_oom",
     R"(Ran out of memory in memory space hbm|TensorCore Hbm usage: .*exceeding available bytes)",
     FC::kHbmOom, RA::kFail, kCause, false, false,
     "the program does not fit in TPU HBM: reduce the batch size, use bfloat16, or use "
     "fewer/smaller layers or shard the parameters; see https://openxla.org/xla/errors/error_1000"},

    // Run-time HBM OOM after the runtime's own retries and defragmentation:
    // openxla docs/errors/error_0100.md (E0100) "Error allocating device buffer: Attempting to
    // allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)", also with
    // "... The largest contiguous region of free memory is 1.2G due to fragmentation.";
    // docs/errors/error_0101.md (E0101) and old PyTorch/XLA (pytorch/xla#3470): "Attempting to
    // reserve 6.48G at the bottom of memory. That was not possible. There are 6.78G free, 0B
    // reserved, and 3.33G reservable." (no "hbm" in it); the StreamExecutor TPU runtime
    // (kingoflolz/mesh-transformer-jax#66): "Failed to allocate request for 32.00MiB (33554432B)
    // on device ordinal 0". The `$` form is the same message broken after its size.
    {"hbm_oom_runtime",
     R"(Attempting to (?:allocate|reserve) \d[\d.]*[KMGTP]?i?B?(?: at the bottom of memory)?\.)"
     R"((?: That was not possible|$)|)"
     R"(Failed to allocate request for \d[\d.]*[KMGTP]?i?B \(\d+B\) on device ordinal)",
     FC::kHbmOom, RA::kFail, kCause, false, false,
     "a TPU buffer or program allocation ran out of HBM at run time: reduce the batch size or the "
     "arrays kept on the device, donate buffers; see https://openxla.org/xla/errors/error_0100"},

    // Cloud TPU troubleshooting guide (TensorFlow): "Unimplemented: File system scheme '[local]'
    // not implemented" — the TPU cannot read the VM's local files (tensorflow/models#3724).
    {"local_filesystem", R"(File system scheme '\[local\]' not implemented)", FC::kUserError,
     RA::kFail, kCause, false, false,
     "the TPU cannot read local files: put the input data and model directory in a Cloud "
     "Storage bucket (gs://...)"},

    // tensorflow tpu/ops/tpu_ops.py: "<dtype> is not a supported TPU infeed type. Supported
    // types are: [...]" (google-research/text-to-text-transfer-transformer#291).
    {"infeed_dtype", R"(is not a supported TPU infeed type)", FC::kUserError, RA::kFail, kCause,
     false, false,
     "an input tensor has a type the TPU infeed does not take: cast it to float32, int32, "
     "bfloat16 or bool in the input pipeline"},

    // tensorflow tpu/tpu_sharding.py: "shape [None, 224, 224, 3] must have a fixed size for
    // dimension 0 that is known at graph construction time."; the XLA bridge: "... must be a
    // compile-time constant" (troubleshooting guide).
    {"dynamic_shape", R"(must have a fixed size for dimension|must be a compile-time constant)",
     FC::kUserError, RA::kFail, kCause, false, false,
     "TPU programs need static shapes: batch with drop_remainder=True and pad variable-length "
     "inputs to fixed sizes"},

    // TF/XLA bridge: "Detected unsupported operations when trying to compile graph ... on
    // XLA_TPU_JIT: ExtractImagePatches (No registered 'ExtractImagePatches' OpKernel for
    // XLA_TPU_JIT devices ...)" (leondgarse/keras_cv_attention_models#8).
    {"unsupported_op", R"(OpKernel for XLA_TPU_JIT devices)", FC::kUserError, RA::kFail, kCause,
     false, false,
     "the model uses an op with no TPU kernel (named in the line): replace it, or move it out "
     "of the TPU computation into the host input pipeline"},

    // tensorflow tpu/tpu_estimator.py: "CrossShardOptimizer must be used for model training on
    // TPUs."
    {"cross_shard_optimizer", R"(CrossShardOptimizer must be used)", FC::kUserError, RA::kFail,
     kCause, false, false,
     "TPUEstimator training needs the optimizer wrapped in "
     "tf.compat.v1.tpu.CrossShardOptimizer"},

    // openxla docs/errors/error_2xxx.md: "INTERNAL: Mosaic failed to compile TPU kernel: ..."
    // (jax-ml/jax#30104, pytorch/xla#8732); jax's Pallas lowering: "Mosaic kernels cannot be
    // automatically partitioned. Please wrap the call in a shard_map" (erfanzar/EasyDeL#149).
    {"mosaic_compile",
     R"(Mosaic failed to compile TPU kernel|Mosaic kernels cannot be automatically partitioned)",
     FC::kUserError, RA::kFail, kCause, false, false,
     "a Pallas/Mosaic kernel does not compile for this TPU (unsupported op, layout or dtype, or "
     "a kernel that needs shard_map): fix the kernel or use the non-kernel implementation"},

    // openxla docs/errors/error_0102.md (E0102): "Executable(jit_...) expected parameter 2482 of
    // size 5242880 (...) but got buffer with incompatible size 1638400 (...)" — a checkpoint or
    // input laid out for another XLA configuration or topology.
    {"buffer_mismatch",
     R"(expected parameter \d+ of size \d+ .*but got buffer with incompatible size)",
     FC::kUserError, RA::kFail, kCause, false, false,
     "an input buffer's layout does not match the compiled program (checkpoint or XLA flags from "
     "another configuration or topology); see https://openxla.org/xla/errors/error_0102"},

    // jax pjit: "ValueError: Received incompatible devices for jitted computation. Got argument
    // ... on platform TPU and sharding_constraint inside jit with device ids [0]"
    // (keras-team/keras#18681).
    {"device_mismatch", R"(Received incompatible devices for jitted computation)",
     FC::kUserError, RA::kFail, kCause, false, false,
     "arguments of one jitted computation are placed on different device sets: make their "
     "shardings use the same mesh"},

    // The TPU runtime rejecting a topology the job configured (pytorch/xla#3042): "Internal:
    // Invalid system configuration: 2x4 host topology with 0 missing hosts, but 1 hosts in total."
    {"topology_config", R"(Invalid system configuration: \S+ host topology)", FC::kUserError,
     RA::kFail, kCause, false, false,
     "the configured TPU topology does not match the hosts running the job: run on every host "
     "of the slice, or fix the topology/TPU_* settings"},
};

}  // namespace

std::span<const RuleSpec> DeterministicRuleSpecs() { return kRules; }

}  // namespace tpud::builtin_rules
