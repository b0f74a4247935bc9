// deadline_exceeded and connection by their specific wording. In a
// multi-host job these are often how one worker sees another's failure, so
// they rank below the causes (RuleTier::kSymptom) and above the bare status
// codes. All restart; connection failures count against max_restarts, so a
// wrong TPU address cannot restart forever.
#include "daemon/classify/builtin_rule_specs.h"

namespace tpud::builtin_rules {
namespace {

constexpr RuleSpec kRules[] = {
    // The TPU itself could not be reached, whatever the status says. tpu_driver
    // (KoboldAI/KoboldAI-Client#235): "Failed to open the gRPC driver: 4: Deadline Exceeded";
    // jax (googlecolab/colabtools#3405): "Requested backend tpu_driver, but it failed to
    // initialize: DEADLINE_EXCEEDED"; tensorflow python/tpu/tpu_system_metadata.py
    // (google-research/bert#325): "Failed to connect to the Tensorflow master. The TPU worker may
    // not be ready (still scheduling) or the Tensorflow master address is incorrect".
    {"tpu_unreachable",
     R"(Failed to open the gRPC driver|)"
     R"(tpu_driver'?,? but it failed to initialize: (?:DEADLINE_EXCEEDED|UNAVAILABLE)|)"
     R"(Failed to connect to the Tensorflow master)",
     FC::kConnection, RA::kRestart, kSymptom, false, false,
     "the TPU could not be reached at its address: check TPU_NAME / the master address and that "
     "the TPU node is READY; restarting (counted)"},

    // The coordination service (openxla xla/tsl/distributed_runtime/coordination): "Barrier
    // timed out. Barrier_id: PjRT_Client_Connect" (ayaka14732/llama-2-jax#20) and "Barrier timed
    // out. Id: [Init]Wait_for_all_tasks_to_register::0" (AI-Hypercomputer/gpu-recipes#2);
    // "UNAVAILABLE: Task /job:jax_worker/replica:0/task:0 heartbeat timeout" (jax-ml/jax#23599);
    // jax's client on a missed heartbeat: "Terminating process because the coordinator detected
    // missing heartbeats"; TF1's session_support.py (megagonlabs/t5-japanese#1): "ShutdownHook:
    // lame workers found: HeartbeatManager(...)".
    {"coordination_timeout",
     R"(Barrier timed out|heartbeat timeout|detected missing heartbeats|stopped sending heartbeats|)"
     R"(lame workers found)",
     FC::kDeadlineExceeded, RA::kResetAndRestart, kSymptom, false, false,
     "a barrier or heartbeat deadline passed (a worker is slow, hung or gone): reset the TPU, then "
     "restart from the newest checkpoint; check the other workers' logs for the first error"},

    // PyTorch/XLA's mesh service (tensorflow/compiler/xla/xla_client/mesh_service.cc):
    // "Failed to meet rendezvous 'init': Socket closed (14)" (pytorch/xla#2246), "... : Trying to
    // connect an http1.x server (14)" (pytorch/xla#3126), "Failed to retrieve mesh configuration:
    // Connection reset by peer (14)" (pytorch/xla#2341), "Failed to connect to client mesh
    // master: host:port" and "Check failed: impl_->channel->WaitForConnected(...)"
    // (pytorch/xla#2651); (14) is gRPC UNAVAILABLE. Not "Waiting to connect to client mesh
    // master" (a progress note, see lookalike_progress).
    {"mesh_rendezvous",
     R"(Failed to meet rendezvous|Failed to connect to client mesh master|)"
     R"(Failed to retrieve mesh configuration|channel->WaitForConnected|)"
     R"(xla_client/\S+\.cc:\d+ : .*\(14\)$)",
     FC::kConnection, RA::kRestart, kSymptom, false, false,
     "the PyTorch/XLA workers could not meet at a rendezvous (one exited or is unreachable): "
     "restarting; check the other workers' logs for the first error"},

    // gRPC core: "failed to connect to all addresses" (TensorSpeech/TensorFlowASR#100), "Socket
    // closed" (tensorflow/tensorflow#23609), "Connection reset by peer"
    // (Lightning-AI/pytorch-lightning#14391), "Failed to connect to remote host: Connection
    // refused" (tensorflow/tensorflow#63832); jax (jax-ml/jax#39095): "Failed to send RPC to
    // coordination service. Either the leader task was preempted/died/restarted unexpectedly or
    // this task is experiencing network issues". tensorflow training/monitored_session.py (INFO):
    // "This may be due to a preemption in a connected worker or parameter server" (TF1: "of a
    // connected worker"): the troubleshooting guide files it under "Unable to connect to TPU
    // server" ("printed when TensorFlow cannot connect to the TPU server URL that is passed to
    // master") — a connection failure, counted, not a preemption.
    {"connection_lost",
     R"(failed to connect to all addresses|Socket closed|Connection reset by peer|)"
     R"(Connection refused|Failed to send RPC to coordination service|)"
     R"(This may be due to a preemption (?:in|of) a connected worker)",
     FC::kConnection, RA::kRestart, kSymptom, false, false,
     "lost the connection to a TPU worker, the TPU server or the coordinator: restarting "
     "(counted, so a wrong address cannot loop forever); check the TPU node's health if it "
     "repeats"},
};

}  // namespace

std::span<const RuleSpec> SymptomRuleSpecs() { return kRules; }

}  // namespace tpud::builtin_rules
