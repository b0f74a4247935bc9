// preemption, device_busy, hardware and cpu_fallback: the TPU or its node
// failed the job, not the job itself. All are causes (RuleTier::kCause);
// those a healthy-looking log line announces at INFO or WARNING decide at
// any severity.
#include "daemon/classify/builtin_rule_specs.h"

namespace tpud::builtin_rules {
namespace {

constexpr RuleSpec kRules[] = {
    // Real preemption only. tensorflow python/tpu/preempted_hook.py logs (WARNING) "TPUPollingThread
    // found TPU %s in state %s, and health %s." and "TPU node %s reached an unrecoverable state
    // %s, terminating the session now." for PREEMPTED or TERMINATED; the GCE metadata server's
    // instance/preempted=TRUE and instance/maintenance-event=TERMINATE_ON_HOST_MAINTENANCE
    // (cloud.google.com/compute/docs/metadata/predefined-metadata-keys); a worker agent relaying
    // the metadata server (mozilla/translations#964): "GCP Metadata Service says termination is
    // imminent"; Ray (ray-project/ray#63807): "the actor's node was preempted". Not TF's "This may
    // be due to a preemption of a connected worker" (see connection_lost) nor a "Preemptible" quota.
    {"preemption",
     R"(reached an unrecoverable state (?:PREEMPTED|TERMINATED)|)"
     R"(found TPU .{1,200} in state (?:PREEMPTED|TERMINATED)\b|)"
     R"(Metadata Service says termination is imminent|\bpreempted ?[=:] ?TRUE\b|)"
     R"(maintenance-event ?[=:] ?TERMINATE_ON_HOST_MAINTENANCE|the actor's node was preempted)",
     FC::kPreemption, RA::kWaitAndRestart, kCause, true, false,
     "the TPU node was preempted or is being taken down for maintenance: wait until the node is "
     "READY (start it if it is STOPPED or PREEMPTED), then restart from the newest checkpoint"},

    // openxla xla/stream_executor/tpu/tpu_initialize_util.cc: "The TPU is already in use by
    // process with pid <N>. Not attempting to load libtpu.so in this process." (jax-ml/jax#22070,
    // logged at INFO); older libtpu: "libtpu.so already in use by another process probably owned by
    // another user" (jax-ml/jax#10192) and "libtpu.so already in used by another process"
    // (pytorch/xla#3214); "If you are sure no other process is using the TPU, run "$ sudo rm
    // /tmp/libtpu_lockfile""; VFIO TPUs (marin-community/marin#2618, #4783): "open(/dev/vfio/0):
    // Device or resource busy; Couldn't open iommu group /dev/vfio/0".
    {"device_busy",
     R"(The TPU is already in use by process|libtpu\.so already in used? by another process|)"
     R"(Couldn't open iommu group|open\(/dev/(?:vfio/\d+|accel\d+)\): Device or resource busy|)"
     R"(rm /tmp/libtpu_lockfile)",
     FC::kDeviceBusy, RA::kResetAndRestart, kCause, true, false,
     "another process holds the TPU, or a dead one left /tmp/libtpu_lockfile: stop the "
     "processes holding /dev/accel* or /dev/vfio/*, remove the stale lock, then restart"},

    // openxla docs/errors/error_0200.md (E0200): "INTERNAL: Accelerator device halted
    // prematurely, perhaps due to an on-device check-failure. Node 0 halted unexpectedly at
    // tag:pc ..." with "observed errors are: [Hardware]" ([Network], [Power]); TF1
    // (tensorflow/tpu#785): "Core halted unexpectedly:"; PyTorch/XLA (pytorch/xla#7138): "Program
    // or fatal error occurred; computation may be invalid"; the runtime on a slice failure
    // (marin-community/marin lib/levanter/CODEX_REFACTOR_KV.md): "FAILED_PRECONDITION: The
    // program continuator has halted unexpectedly.", "INTERNAL: *** Halt is unexpected, all
    // pending programs will fail.", "Detected slice failure, core dump will begin."; no TPU
    // device at all, reported under UNAVAILABLE (jax-ml/jax#13260): "No TPU Platform available".
    {"hardware",
     R"(Accelerator device halted prematurely|Core halted unexpectedly|)"
     R"(Program or fatal error occurred|Halt is unexpected|program continuator has halted unexpectedly|)"
     R"(Detected slice failure|observed errors are: \[(?:Hardware|Network|Power)\]|)"
     R"(No TPU Platform available)",
     FC::kHardware, RA::kResetAndRestart, kCause, false, false,
     "a TPU core halted or the TPU is missing: reset and restart, and drain the host if it "
     "repeats there; see https://openxla.org/xla/errors/error_0200"},

    // A node whose health is not HEALTHY (Cloud TPU API Node.Health: TIMEOUT,
    // UNHEALTHY_TENSORFLOW, UNHEALTHY_MAINTENANCE; cloud.google.com/tpu/docs/reference/rest/v1/
    // projects.locations.nodes): tensorflow python/tpu/preempted_hook.py logs (WARNING)
    // "TPUPollingThread found TPU %s in state %s, and health %s."; the node itself printed
    // (tensorflow/tpu#609) "'health': 'HEALTHY'".
    {"node_unhealthy",
     R"(and health (?:TIMEOUT|UNHEALTHY_[A-Z_]+|DEPRECATED_UNHEALTHY)\b|)"
     R"('health': '(?:TIMEOUT|UNHEALTHY_[A-Z_]+|DEPRECATED_UNHEALTHY)')",
     FC::kHardware, RA::kResetAndRestart, kCause, true, false,
     "the TPU node reports that it is not HEALTHY: reset it, then restart; recreate the node if "
     "it stays unhealthy"},

    // pytorch/xla torch_xla/_internal/pjrt.py: "Defaulting to PJRT_DEVICE=CPU" (pytorch/xla#8626);
    // jax xla_bridge (jax-ml/jax#10192, #4569): "No GPU/TPU found, falling back to CPU." and
    // (AI-Hypercomputer/RecML#9) "A Google TPU may be present on this machine, but either a
    // TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu." All are warnings.
    {"cpu_fallback",
     R"(Defaulting to PJRT_DEVICE=CPU|No GPU/TPU found, falling back to CPU|)"
     R"(TPU may be present on this machine, but)",
     FC::kCpuFallback, RA::kRestart, kCause, true, false,
     "the framework found no usable TPU and fell back to the CPU: set PJRT_DEVICE=TPU "
     "(torch_xla) or TPU_NAME / JAX_PLATFORMS, and check that libtpu is installed"},
};

}  // namespace

std::span<const RuleSpec> InfrastructureRuleSpecs() { return kRules; }

}  // namespace tpud::builtin_rules
