#include "daemon/tpu/cloud_control.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

bool IsStopped(const std::string& state) { return state == kNodeStopped || state == kNodePreempted; }

bool IsReady(const TpuNode& node, bool healthy) {
  return node.state == kNodeReady && (!healthy || node.health == kNodeHealthy);
}

// Tracks the node's state across polls: reports changes, remembers since when
// the current state holds (for "stuck in STARTING for 1800 s").
class StateTracker {
 public:
  StateTracker(const TpuCall& call, const Deadline& deadline) : call_(call), deadline_(deadline) {}

  void Observe(const TpuNode& node) {
    if (node.state != state_) since_ = deadline_.clock().Now();
    if (node.state != state_ || node.health != health_) call_.Report(node.Summary());
    state_ = node.state;
    health_ = node.health;
    description_ = node.health_description;
  }

  absl::Status Stuck(const TpuTarget& target, bool healthy) const {
    std::string what = absl::StrCat("node ", target.ResourceName());
    if (state_.empty()) {
      absl::StrAppend(&what, " did not answer within ", FormatSeconds(deadline_.Elapsed()));
    } else if (state_ == kNodeReady && healthy) {
      absl::StrAppend(&what, " stuck in READY with health ", health_.empty() ? "(none)" : health_,
                      description_.empty() ? "" : " (" + description_ + ")", " for ", Held());
    } else {
      absl::StrAppend(&what, " stuck in ", state_, " for ", Held());
    }
    return absl::DeadlineExceededError(absl::StrCat(what, " (waited ", FormatSeconds(deadline_.Elapsed()),
                                                    " for READY", healthy ? " and HEALTHY" : "", ")"));
  }

 private:
  std::string Held() const { return FormatSeconds(deadline_.clock().Now() - since_); }

  const TpuCall& call_;
  const Deadline& deadline_;
  std::string state_, health_, description_;
  SteadyTime since_{};
};

}  // namespace

const char* NodeVerbName(NodeVerb verb) { return verb == NodeVerb::kStop ? "stop" : "start"; }

CloudTpuControl::CloudTpuControl(TpuConfig config, std::shared_ptr<const MetadataClient> metadata,
                                 std::shared_ptr<WaitClock> clock)
    : config_(std::move(config)), metadata_(std::move(metadata)), clock_(std::move(clock)) {}

absl::StatusOr<TpuTarget> CloudTpuControl::Target(CancelToken* cancel) {
  absl::MutexLock lock(&mu_);
  if (target_) return *target_;
  absl::StatusOr<TpuTarget> target = ResolveTpuTarget(config_, *metadata_, cancel);
  if (target.ok()) target_ = *target;
  return target;
}

absl::StatusOr<TpuNode> CloudTpuControl::Describe(CancelToken* cancel) {
  absl::StatusOr<TpuTarget> target = Target(cancel);
  if (!target.ok()) return target.status();
  Deadline deadline(*clock_, Seconds(config_.timeout_seconds));
  return GetNode(*target, deadline, cancel);
}

absl::Status CloudTpuControl::Reset(const TpuCall& call) {
  absl::StatusOr<TpuTarget> target = Target(call.cancel);
  if (!target.ok()) return target.status();
  Deadline deadline(*clock_, Seconds(config_.timeout_seconds));
  absl::StatusOr<TpuNode> node = GetNode(*target, deadline, call.cancel);
  if (!node.ok()) return node.status();
  call.Report(absl::StrCat("reset ", target->ResourceName(), " (", name(), "): ", node->Summary()));
  if (IsStopped(node->state) || node->state == kNodeStopping) {
    call.Report(absl::StrCat("node already ", node->state, ": no stop needed"));
  } else if (absl::Status s = RunVerb(*target, NodeVerb::kStop, deadline, call); !s.ok()) {
    return s;
  }
  return WaitReady(*target, deadline, call, /*healthy=*/true, /*start_if_stopped=*/true);
}

absl::Status CloudTpuControl::Start(const TpuCall& call) {
  absl::StatusOr<TpuTarget> target = Target(call.cancel);
  if (!target.ok()) return target.status();
  Deadline deadline(*clock_, Seconds(config_.timeout_seconds));
  call.Report(absl::StrCat("start ", target->ResourceName(), " (", name(), ")"));
  return WaitReady(*target, deadline, call, /*healthy=*/false, /*start_if_stopped=*/true);
}

absl::Status CloudTpuControl::WaitReady(const TpuTarget& target, const Deadline& deadline,
                                        const TpuCall& call, bool healthy, bool start_if_stopped) {
  StateTracker tracker(call, deadline);
  bool started = false;
  while (true) {
    absl::StatusOr<TpuNode> node = GetNode(target, deadline, call.cancel);
    if (!node.ok()) {
      const bool out_of_time =
          node.status().code() == absl::StatusCode::kDeadlineExceeded && deadline.Expired();
      return out_of_time ? tracker.Stuck(target, healthy) : node.status();
    }
    tracker.Observe(*node);
    if (IsReady(*node, healthy)) return absl::OkStatus();
    if (start_if_stopped && !started && IsStopped(node->state)) {
      if (absl::Status s = RunVerb(target, NodeVerb::kStart, deadline, call); !s.ok()) return s;
      started = true;
      continue;
    }
    if (deadline.Expired()) return tracker.Stuck(target, healthy);
    if (absl::Status s = deadline.SleepAtMost(poll_interval(), call.cancel); !s.ok()) return s;
  }
}

}  // namespace tpud
