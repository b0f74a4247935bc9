#include "daemon/tpu/tpu_ladder.h"

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

using FC = FailureClass;

// States a node does not come back from by itself or by a start (reference §1;
// TensorFlow's client treats TERMINATED as not recoverable in place).
bool IsGone(const std::string& state) {
  return state == "TERMINATED" || state == "DELETING" || state == "HIDING" || state == "HIDDEN";
}

// The node's own condition decides before the failure class does.
std::optional<TpuPlan> PlanForNode(const TpuNode& node) {
  if (node.state.empty() || node.state == kNodeReady) {
    if (node.health == "UNHEALTHY_MAINTENANCE") {
      return TpuPlan{TpuRung::kWaitForMaintenance,
                     absl::StrCat("node is in maintenance (", node.Summary(), "): waiting until it is HEALTHY")};
    }
    return std::nullopt;
  }
  if (IsGone(node.state)) {
    return TpuPlan{TpuRung::kNone, absl::StrCat("node is ", node.state, ": not recoverable in place")};
  }
  const bool stopped = node.state == kNodePreempted || node.state == kNodeStopped || node.state == kNodeStopping;
  return TpuPlan{TpuRung::kNodeStart, absl::StrCat("node is ", node.state,
                                                   stopped ? ": starting it" : ": waiting until it is READY")};
}

TpuPlan LocalFirst(const TpuLadderInput& in) {
  if (in.escalate && in.has_node_backend) {
    return {TpuRung::kNodeReset, absl::StrCat(FailureClassName(in.failure_class),
                                              ": a local reset did not help; resetting the node")};
  }
  if (in.has_local_backend) {
    return {TpuRung::kLocal, absl::StrCat(FailureClassName(in.failure_class), ": freeing the TPU devices")};
  }
  if (in.has_node_backend) {
    return {TpuRung::kNodeReset, absl::StrCat(FailureClassName(in.failure_class), ": resetting the node")};
  }
  return {TpuRung::kNone, "no TPU reset backend"};
}

TpuPlan NodeFirst(const TpuLadderInput& in) {
  const std::string what = FailureClassName(in.failure_class);
  if (in.has_node_backend) return {TpuRung::kNodeReset, absl::StrCat(what, ": resetting the node")};
  if (in.has_local_backend) {
    return {TpuRung::kLocal, absl::StrCat(what, ": no node backend; freeing the TPU devices")};
  }
  return {TpuRung::kNone, "no TPU reset backend"};
}

TpuPlan ForConnection(const TpuLadderInput& in) {
  if (!in.has_node_backend) return {TpuRung::kNone, "connection: no node backend to read the node's health"};
  if (!in.node) {
    return {TpuRung::kNone, absl::StrCat("connection: node health unknown (", in.describe_error, "); not resetting")};
  }
  if (in.node->health == kNodeHealthy) return {TpuRung::kNone, "connection: node is HEALTHY; restarting is enough"};
  return {TpuRung::kNodeReset, absl::StrCat("connection: node is ", in.node->Summary(), "; resetting it")};
}

}  // namespace

const char* TpuRungName(TpuRung rung) {
  switch (rung) {
    case TpuRung::kNone: return "none";
    case TpuRung::kLocal: return "local";
    case TpuRung::kNodeReset: return "node_reset";
    case TpuRung::kNodeStart: return "node_start";
    case TpuRung::kWaitForMaintenance: return "wait_for_maintenance";
  }
  return "none";
}

TpuPlan PlanTpuRecovery(const TpuLadderInput& in) {
  if (in.node) {
    if (std::optional<TpuPlan> plan = PlanForNode(*in.node)) return *plan;
  }
  switch (in.failure_class) {
    case FC::kDeviceBusy:
    case FC::kCrash:
    case FC::kCpuFallback:
      return LocalFirst(in);
    case FC::kDeadlineExceeded:
    case FC::kHang:
    case FC::kHardware:
    case FC::kUnknown:
      return NodeFirst(in);
    case FC::kConnection:
      return ForConnection(in);
    case FC::kPreemption:
      return {TpuRung::kNone, in.node ? "preemption: the node is READY again; restarting is enough"
                                      : "preemption: restarting is enough"};
    case FC::kHbmOom:
    case FC::kUserError:
      return {TpuRung::kNone, absl::StrCat(FailureClassName(in.failure_class), ": deterministic; a reset does not help")};
  }
  return {TpuRung::kNone, "unknown failure class"};
}

}  // namespace tpud
