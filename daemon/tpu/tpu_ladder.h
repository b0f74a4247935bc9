// The TPU recovery ladder: which rung (local device reset, node reset, node
// start, waiting out maintenance, nothing) answers one failure, given its class
// and what the node backend says about the node. Pure: no I/O, no clock; the
// TpuRecovery service (tpu_recovery.h) runs the rung it picks.
//
// Rules (failure classes: daemon/classify/rules_*.cc, each rule with its source;
// node states and health: googleapis google/cloud/tpu/v2/cloud_tpu.proto, Node.State
// and Node.Health):
//   node not READY (PREEMPTED, STOPPED, STOPPING, STARTING, REPAIRING, ...)
//                                    -> start it / wait for READY;
//   node TERMINATED, DELETING, HIDING, HIDDEN -> nothing (not recoverable in place);
//   node READY but UNHEALTHY_MAINTENANCE -> wait until HEALTHY;
//   device_busy, crash, cpu_fallback -> local first; the node when local
//                                       already failed to help (`escalate`);
//   deadline_exceeded, hang, hardware, unknown -> node reset (local without a
//                                                 node backend);
//   connection -> node reset when health is known and not HEALTHY, else nothing;
//   preemption -> nothing beyond the node checks above;
//   hbm_oom, user_error -> nothing (deterministic).
#pragma once

#include <optional>
#include <string>

#include "daemon/core/failure_rule.h"
#include "daemon/tpu/tpu_control.h"

namespace tpud {

enum class TpuRung {
  kNone,                // Nothing to do, or nothing that helps.
  kLocal,               // Free this host's devices: the local backend's Reset.
  kNodeReset,           // Stop and start the node: the node backend's Reset.
  kNodeStart,           // Start a stopped node, or wait for it to be READY: the node backend's Start.
  kWaitForMaintenance,  // Poll the node until it is HEALTHY again.
};

// "none", "local", "node_reset", "node_start", "wait_for_maintenance". Static.
const char* TpuRungName(TpuRung rung);

struct TpuLadderInput {
  FailureClass failure_class = FailureClass::kUnknown;
  bool has_node_backend = false;  // api or gcloud is configured.
  bool has_local_backend = false;
  // The node as Describe saw it just now; nullopt without a node backend, or
  // when Describe failed (then `describe_error` says why).
  std::optional<TpuNode> node;
  std::string describe_error;
  // A local reset already failed for this failure, or did not stop the same
  // class from coming back within the hour: climb to the node.
  bool escalate = false;
};

struct TpuPlan {
  TpuRung rung = TpuRung::kNone;
  std::string why;  // One line for the incident and the log, e.g. "node is PREEMPTED: starting it".
};

// The rung for `input`, per the rules above. Never fails.
TpuPlan PlanTpuRecovery(const TpuLadderInput& input);

}  // namespace tpud
