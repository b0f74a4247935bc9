#include "daemon/tpu/tpu_recovery.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

// A local reset followed, within this long, by the same failure of the same
// job did not help: the next reset climbs to the node.
constexpr Seconds kEscalationWindow{3600};

// Rungs that change something, and so count against the budget and back off.
bool Acts(TpuRung rung) {
  return rung == TpuRung::kLocal || rung == TpuRung::kNodeReset || rung == TpuRung::kNodeStart;
}

std::string Who(const TpuResetRequest& request, bool by_hand) {
  return by_hand ? std::string("reset by hand") : absl::StrCat("job ", request.job);
}

TpuCall MakeCall(CancelToken* cancel, const std::vector<int>& spare_pgids, const std::string& who) {
  TpuCall call;
  call.cancel = cancel;
  call.spare_pgids = spare_pgids;
  call.progress = [who](const std::string& line) { spdlog::info("{}: TPU: {}", who, line); };
  return call;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TpuRecovery>> TpuRecovery::Create(boost::asio::io_context& io,
                                                                 const TpuConfig& config,
                                                                 const TpuResetPolicy& policy, TpuDeps deps) {
  if (absl::Status s = ValidateTpuConfig(config); !s.ok()) return s;
  if (absl::Status s = ValidateTpuResetPolicy(policy); !s.ok()) return s;
  if (config.backend == "none") return std::unique_ptr<TpuRecovery>();
  if (!deps.clock) deps.clock = SystemWaitClock();
  Backends backends;
  backends.clock = deps.clock;
  TpuConfig local_config = config;
  local_config.backend = "local";
  absl::StatusOr<std::unique_ptr<TpuControl>> local = MakeTpuControl(local_config, deps);
  if (!local.ok()) return local.status();
  backends.local = std::move(*local);
  if (config.backend != "local") {
    absl::StatusOr<std::unique_ptr<TpuControl>> node = MakeTpuControl(config, deps);
    if (!node.ok()) return node.status();
    backends.node = std::move(*node);
  }
  return std::make_unique<TpuRecovery>(io, config, policy, std::move(backends));
}

TpuRecovery::TpuRecovery(boost::asio::io_context& io, TpuConfig config, TpuResetPolicy policy,
                         Backends backends)
    : io_(io),
      config_(std::move(config)),
      node_(std::move(backends.node)),
      local_(std::move(backends.local)),
      clock_(std::move(backends.clock)),
      budget_(policy),
      worker_([this] { WorkerLoop(); }) {
  absl::MutexLock lock(&mu_);
  for (const TpuControl* backend : {node_.get(), local_.get()}) {
    if (backend == nullptr) continue;
    resets_total_[{backend->name(), "ok"}] = 0;
    resets_total_[{backend->name(), "failed"}] = 0;
  }
}

TpuRecovery::~TpuRecovery() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    if (current_cancel_ != nullptr) current_cancel_->Cancel();
  }
  worker_.join();
}

void TpuRecovery::Reset(const TpuResetRequest& request, std::function<void(TpuResetResult)> done) {
  Enqueue(Task{request, std::nullopt, clock_->Now(), std::move(done)});
}

absl::Status TpuRecovery::ResetByHand(const std::string& backend, std::vector<int> spare_pgids,
                                      std::function<void(TpuResetResult)> done) {
  const bool known = (backend.empty() && (node_ || local_)) || (backend == "local" && local_) ||
                     (node_ && backend == node_->name());
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TPU backend \"", backend, "\" is not configured (configured: ", node_ ? node_->name() + ", " : "",
        local_ ? "local" : "", "; tpu.reset.backend)"));
  }
  TpuResetRequest request;
  request.spare_pgids = std::move(spare_pgids);
  Enqueue(Task{std::move(request), backend, clock_->Now(), std::move(done)});
  return absl::OkStatus();
}

void TpuRecovery::RefreshNode() {
  if (!node_) return;
  {
    absl::MutexLock lock(&mu_);
    if (refresh_queued_) return;
    refresh_queued_ = true;
  }
  Task task;
  task.refresh = true;
  task.enqueued = clock_->Now();
  Enqueue(std::move(task));
}

std::optional<std::pair<TpuNode, SteadyTime>> TpuRecovery::CachedNode() const {
  absl::MutexLock lock(&mu_);
  return node_cache_;
}

absl::StatusOr<TpuNode> TpuRecovery::DescribeAndCache(CancelToken* cancel) const {
  absl::StatusOr<TpuNode> node = node_->Describe(cancel);
  if (node.ok()) {
    absl::MutexLock lock(&mu_);
    node_cache_.emplace(*node, clock_->Now());
  }
  return node;
}

bool TpuRecovery::HasWork() const { return stopping_ || !queue_.empty(); }

void TpuRecovery::Enqueue(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    queue_.push_back(std::move(task));
  }
}

void TpuRecovery::WorkerLoop() {
  while (true) {
    Task task;
    CancelToken cancel;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &TpuRecovery::HasWork));
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      current_cancel_ = &cancel;
      if (task.refresh) refresh_queued_ = false;
      running_ = task.refresh ? "" : Who(task.request, task.by_hand.has_value());
    }
    if (task.refresh) {
      (void)DescribeAndCache(&cancel);
      absl::MutexLock lock(&mu_);
      current_cancel_ = nullptr;
      continue;
    }
    TpuResetResult result = task.by_hand ? RunByHand(task, &cancel) : RunLadder(task, &cancel);
    {
      absl::MutexLock lock(&mu_);
      current_cancel_ = nullptr;
      running_.clear();
      if (stopping_) return;
    }
    boost::asio::post(io_, [done = std::move(task.done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  }
}

TpuPlan TpuRecovery::Plan(const Task& task, CancelToken* cancel) {
  TpuLadderInput in;
  in.failure_class = task.request.failure_class;
  in.has_node_backend = node_ != nullptr;
  in.has_local_backend = local_ != nullptr;
  if (node_) {
    absl::StatusOr<TpuNode> node = DescribeAndCache(cancel);
    if (node.ok()) {
      in.node = *std::move(node);
    } else {
      in.describe_error = std::string(node.status().message());
    }
  }
  absl::MutexLock lock(&mu_);
  const auto it = last_local_.find(task.request.job);
  in.escalate = it != last_local_.end() && it->second.first == in.failure_class &&
                clock_->Now() - it->second.second < kEscalationWindow;
  return PlanTpuRecovery(in);
}

TpuResetResult TpuRecovery::RunLadder(const Task& task, CancelToken* cancel) {
  const std::string who = Who(task.request, false);
  const TpuPlan plan = Plan(task, cancel);
  spdlog::info("{}: TPU recovery: {} (rung {})", who, plan.why, TpuRungName(plan.rung));
  if (plan.rung == TpuRung::kNone || CoveredByNodeReset(plan.rung, task.enqueued)) {
    if (plan.rung != TpuRung::kNone) spdlog::info("{}: the node was reset after this failure; not again", who);
    return TpuResetResult{};
  }
  if (Acts(plan.rung)) {
    if (absl::Status s = Admit(cancel); !s.ok()) {
      const TpuResetResult refused{true, BackendFor(plan.rung), Seconds(0), std::move(s)};
      Remember(task, TpuRungName(plan.rung), plan.why, refused);
      return refused;
    }
  }
  const TpuResetResult result = RunWithEscalation(plan.rung, MakeCall(cancel, task.request.spare_pgids, who));
  {
    absl::MutexLock lock(&mu_);
    if (result.backend == "local" && result.status.ok()) {
      last_local_[task.request.job] = {task.request.failure_class, clock_->Now()};
    } else {
      last_local_.erase(task.request.job);
    }
  }
  Remember(task, TpuRungName(plan.rung), plan.why, result);
  return result;
}

bool TpuRecovery::CoveredByNodeReset(TpuRung rung, SteadyTime enqueued) const {
  absl::MutexLock lock(&mu_);
  return rung == TpuRung::kNodeReset && last_node_reset_end_ && *last_node_reset_end_ > enqueued;
}

absl::Status TpuRecovery::Admit(CancelToken* cancel) {
  {
    absl::MutexLock lock(&mu_);
    if (!budget_.Allows(clock_->Now())) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "not reset: tpu.reset.max_resets_per_hour (", budget_.policy().max_resets_per_hour, ") reached"));
    }
  }
  return ThrottleBeforeReset(cancel);
}

// A failed local reset climbs to the node at once, when there is a node backend.
TpuResetResult TpuRecovery::RunWithEscalation(TpuRung rung, const TpuCall& call) {
  TpuResetResult result = RunRung(rung, call);
  if (rung != TpuRung::kLocal || result.status.ok() || !node_ || call.cancel->cancelled()) return result;
  call.Report(absl::StrCat("local reset failed (", result.status.message(), "); resetting the node"));
  TpuResetResult node = RunRung(TpuRung::kNodeReset, call);
  node.backend = absl::StrCat("local,", node.backend);
  node.duration += result.duration;
  return node;
}

TpuResetResult TpuRecovery::RunByHand(const Task& task, CancelToken* cancel) {
  const std::string& backend = *task.by_hand;
  const TpuRung rung = backend == "local" || (backend.empty() && !node_) ? TpuRung::kLocal : TpuRung::kNodeReset;
  spdlog::info("reset by hand: TPU reset through the {} backend", BackendFor(rung));
  TpuResetResult result = RunRung(rung, MakeCall(cancel, task.request.spare_pgids, "reset by hand"));
  Remember(task, TpuRungName(rung), "by hand", result);
  return result;
}

absl::Status TpuRecovery::ThrottleBeforeReset(CancelToken* cancel) {
  Seconds wait{0};
  {
    absl::MutexLock lock(&mu_);
    wait = budget_.WaitBefore(clock_->Now());
  }
  if (wait <= Seconds(0)) return absl::OkStatus();
  spdlog::info("TPU reset: waiting {} after the last reset (tpu.reset.backoff_*_seconds)", FormatSeconds(wait));
  return clock_->Sleep(Deadline::ToDuration(wait), cancel);
}

TpuResetResult TpuRecovery::RunRung(TpuRung rung, const TpuCall& call) {
  const SteadyTime start = clock_->Now();
  absl::Status status;
  switch (rung) {
    case TpuRung::kLocal: status = local_->Reset(call); break;
    case TpuRung::kNodeReset: status = node_->Reset(call); break;
    case TpuRung::kNodeStart: status = node_->Start(call); break;
    case TpuRung::kWaitForMaintenance: status = WaitForMaintenance(call); break;
    case TpuRung::kNone: break;
  }
  const SteadyTime end = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (Acts(rung)) budget_.Record(start, end);
  if (rung == TpuRung::kNodeReset || rung == TpuRung::kNodeStart) node_cache_.reset();  // The node changed.
  if (status.ok() && (rung == TpuRung::kNodeReset || rung == TpuRung::kNodeStart)) last_node_reset_end_ = end;
  return TpuResetResult{true, BackendFor(rung), end - start, std::move(status)};
}

absl::Status TpuRecovery::WaitForMaintenance(const TpuCall& call) {
  const Deadline deadline(*clock_, Seconds(config_.timeout_seconds));
  std::string last = "unknown";
  while (true) {
    absl::StatusOr<TpuNode> node = DescribeAndCache(call.cancel);
    if (node.ok() && node->ReadyAndHealthy()) return absl::OkStatus();
    if (node.ok()) last = node->Summary();
    if (!node.ok() && node.status().code() == absl::StatusCode::kCancelled) return node.status();
    if (deadline.Expired()) {
      return absl::DeadlineExceededError(absl::StrCat("node still ", last, " after ",
                                                      FormatSeconds(Seconds(config_.timeout_seconds)),
                                                      " (tpu.reset.timeout_seconds)"));
    }
    call.Report(absl::StrCat("waiting for maintenance to end: ", last));
    const auto poll = Deadline::ToDuration(Seconds(config_.poll_interval_seconds));
    if (absl::Status s = deadline.SleepAtMost(poll, call.cancel); !s.ok()) return s;
  }
}

std::string TpuRecovery::BackendFor(TpuRung rung) const {
  if (rung == TpuRung::kLocal) return local_ ? local_->name() : "local";
  return node_ ? node_->name() : "none";
}

void TpuRecovery::Remember(const Task& task, const std::string& rung, const std::string& why,
                           const TpuResetResult& result) {
  if (result.attempted) {
    spdlog::log(result.status.ok() ? spdlog::level::info : spdlog::level::warn, "{}: TPU {} ({}) {} in {}: {}",
                Who(task.request, task.by_hand.has_value()), rung, result.backend,
                result.status.ok() ? "done" : "failed", FormatSeconds(result.duration),
                result.status.ok() ? "ok" : std::string(result.status.message()));
  }
  absl::MutexLock lock(&mu_);
  last_ = TpuResetRecord{task.request.job, rung, why, result, std::chrono::system_clock::now()};
  if (result.attempted) {
    // "local,api" (a failed local reset escalated to the node): the node's.
    const std::string backend = result.backend.substr(result.backend.rfind(',') + 1);
    ++resets_total_[{backend, result.status.ok() ? "ok" : "failed"}];
  }
}

absl::StatusOr<TpuNode> TpuRecovery::Describe(CancelToken* cancel, Seconds max_age) const {
  if (!node_) {
    return absl::FailedPreconditionError("no node backend (tpu.reset.backend is local): nothing to describe");
  }
  if (max_age > Seconds::zero()) {
    absl::MutexLock lock(&mu_);
    if (node_cache_ && clock_->Now() - node_cache_->second <= max_age) return node_cache_->first;
  }
  return DescribeAndCache(cancel);
}

TpuRecoveryStatus TpuRecovery::Status() const {
  absl::MutexLock lock(&mu_);
  TpuRecoveryStatus status;
  status.node_backend = node_ ? node_->name() : "";
  status.local_backend = local_ != nullptr;
  status.resets_last_hour = budget_.CountInWindow(clock_->Now());
  status.max_resets_per_hour = budget_.policy().max_resets_per_hour;
  status.running = running_;
  status.queued = static_cast<int>(queue_.size());
  status.last = last_;
  status.resets_total = resets_total_;
  return status;
}

}  // namespace tpud
