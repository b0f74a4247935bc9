// crash and the bare status codes: wrappers that say something failed but
// not what (RuleTier::kGeneric), so any specific rule on the same line or in
// the same attempt wins over them. Then the lookalikes: lines that resemble
// failures but are warnings or progress notes every healthy job may print.
#include "daemon/classify/builtin_rule_specs.h"

namespace tpud::builtin_rules {
namespace {

constexpr char kLookalikeHint[] = "";  // Lookalikes never decide, so they show no hint.

constexpr RuleSpec kRules[] = {
    // absl/glog CHECK failures: "Check failed: ..." (also inside a Python exception,
    // google/gemma_pytorch#25) and "*** Check failure stack trace: ***" (pytorch/xla#7138);
    // fatal log lines with and without a date: glog "F0317 02:46:21.118406 358837 file.cc:10] "
    // (jax-ml/jax#15210), absl "F0000 00:00:1716973077.466057 9049 file.cc:487] " (also glued to
    // a tqdm bar, pytorch/xla#7138), TF "2023-04-08 11:22:09.148143: F tensorflow/...cc:33] "
    // (pytorch/xla#4847); absl's failure signal handler "*** SIGSEGV (@0x10), see ... received by
    // PID" (jax-ml/jax#13043), "*** SIGABRT received by PID 545434" (jax-ml/jax#9642), "RAW:
    // Raising signal 6 with default behavior" (google-research/t5x#344) and "RAW: Remote crash data
    // gathering hook invoked" (pytorch/xla#7138); a shell's "Aborted (core dumped)" and libc++'s
    // "terminating due to uncaught exception of type" (jax-ml/jax#13402); libstdc++'s "terminate
    // called after throwing an instance of"; CPython's "Fatal Python error: Segmentation fault".
    {"crash",
     R"(Check failed|\*\*\* Check failure stack trace|)"
     R"(\bF\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] |\d\d:\d\d:\d\d\.\d+: F \S+:\d+\] |)"
     R"(\*\*\* SIG[A-Z]+ .*received by PID|RAW: Raising signal \d+|)"
     R"(RAW: Remote crash data gathering hook invoked|\b(?:Aborted|Segmentation fault) \(core dumped\)|)"
     R"(terminate called after throwing an instance of|terminating due to uncaught exception|)"
     R"(Fatal Python error: (?:Aborted|Segmentation fault))",
     FC::kCrash, RA::kRestart, kGeneric, false, false,
     "the trainer crashed (CHECK failure, fatal error or crash signal): restarting from the "
     "newest checkpoint; if it crashes again at the same step, the failure is deterministic"},

    // The status alone: tensorflow errors.DeadlineExceededError, absl/gRPC DEADLINE_EXCEEDED and
    // its messages "Deadline Exceeded" (jax-ml/jax#35905) and TF1's "Deadline exceeded".
    {"deadline_exceeded", R"(DeadlineExceededError|\bDEADLINE_EXCEEDED\b|\bDeadline [Ee]xceeded\b)",
     FC::kDeadlineExceeded, RA::kResetAndRestart, kGeneric, false, false,
     "a collective, barrier or RPC deadline passed (a worker is slow, hung or gone): reset the "
     "TPU, then restart from the newest checkpoint"},

    // gRPC status UNAVAILABLE (code 14) in its spellings: "UNAVAILABLE: ..." and
    // StatusCode.UNAVAILABLE, TF1's "Unavailable: ..." (TensorSpeech/TensorFlowASR#100),
    // tensorflow errors.UnavailableError, gRPC's JSON "grpc_status":14 and its text form
    // grpc_status:14 (jax-ml/jax#39095); never the English word "unavailable".
    {"connection",
     R"(\bUNAVAILABLE\b|\bUnavailable: |UnavailableError|"grpc_status":14\b|grpc_status: ?14\b|)"
     R"(StatusCode\.UNAVAILABLE)",
     FC::kConnection, RA::kRestart, kGeneric, false, false,
     "lost the connection to a TPU worker or the coordinator (gRPC UNAVAILABLE): restarting; "
     "if it repeats, check the TPU node's health and reset it"},

    // Lookalikes. The TPU client's warning (huggingface/diffusers#856): "TPU Execute is taking a
    // long time. This might be due to a deadlock ..."; jax xla_bridge.py (jax-ml/jax#14300): "TPU
    // backend initialization is taking more than 60.0 seconds"; every JAX process on a TPU host
    // without CUDA: "failed call to cuInit: INTERNAL: CUDA error" (jax xla_bridge probes CUDA).
    {"lookalike_slow", R"(TPU Execute is taking a long time|initialization is taking more than)",
     FC::kUnknown, RA::kRestart, kGeneric, false, true, kLookalikeHint},
    {"lookalike_cuinit", R"(failed call to cuInit)", FC::kUnknown, RA::kRestart, kGeneric, false,
     true, kLookalikeHint},
    // libtpu's metadata retries (jax-ml/jax#14300, #17495): "Failed to fetch URL on try 1 out of
    // 6: Timeout was reached"; PyTorch/XLA's mesh progress note (pytorch/xla#2137): "Waiting to
    // connect to client mesh master (300 seconds)"; backends jax probes and skips (jax-ml/jax
    // xla_bridge.py, kalininalab/alphafold_non_docker#68): "Unable to initialize backend
    // 'tpu_driver': NOT_FOUND"; a Cloud quota named after preemptible TPUs
    // (marin-community/marin#87): "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI'
    // exhausted."
    {"lookalike_progress",
     R"(Failed to fetch URL on try \d+ out of \d+|Timeout was reached|)"
     R"(Waiting to connect to client mesh master|)"
     R"(Unable to initialize backend '(?:cuda|rocm|tpu_driver|METAL|gpu)'|Quota '[^']+' exhausted)",
     FC::kUnknown, RA::kRestart, kGeneric, false, true, kLookalikeHint},
};

}  // namespace

std::span<const RuleSpec> GenericRuleSpecs() { return kRules; }

}  // namespace tpud::builtin_rules
