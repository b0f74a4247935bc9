// TpuRecovery: the service that resets the TPU for failed attempts.
// It owns the TPU control backends (the node backend from `tpu.reset.backend`,
// api or gcloud, and the local backend), picks a rung of the recovery ladder
// for each request (tpu_ladder.h), enforces the reset budget and backoff
// (reset_budget.h), and runs every backend call on ONE worker thread, in
// request order, never on the event loop. Results are posted back to the
// io_context, so `done` callbacks run on the loop thread.
//
// Plugs into JobDeps::reset_tpu (the supervisor's Job) through
// Supervisor::SetTpuReset.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/job_spec.h"
#include "daemon/tpu/reset_request.h"
#include "daemon/tpu/reset_budget.h"
#include "daemon/tpu/tpu_control.h"
#include "daemon/tpu/tpu_ladder.h"

namespace tpud {

// One finished reset, for `tpuctl tpu`.
struct TpuResetRecord {
  std::string job;      // Empty for a reset by hand.
  std::string rung;     // TpuRungName.
  std::string why;      // The ladder's reason, or "by hand".
  TpuResetResult result;
  WallTime finished;
};

// What `tpuctl tpu` shows of the recovery service.
struct TpuRecoveryStatus {
  std::string node_backend;  // "api", "gcloud"; empty without one.
  bool local_backend = false;
  int resets_last_hour = 0;
  int max_resets_per_hour = 0;
  std::string running;       // "trainer: node_reset" while a reset runs; empty when idle.
  int queued = 0;            // Requests waiting behind it.
  std::optional<TpuResetRecord> last;
  // Resets since tpud started, by (backend, result), for tpud_tpu_resets_total:
  // result "ok" or "failed" (a reset the budget refused is failed); an
  // escalated reset counts for the backend that finished it. Each configured
  // backend has both entries from the start, at 0, so a first failure shows
  // as an increase.
  std::map<std::pair<std::string, std::string>, std::int64_t> resets_total;
};

// Thread-safety: Reset, ResetByHand, Describe and Status may be called from any
// thread; `done` always runs on the loop thread of `io`. Destruction cancels
// the backend call in flight and drops queued requests (their `done` is never
// called); destroy it before the Supervisor whose jobs wait on it, and while
// nothing else calls it.
class TpuRecovery {
 public:
  struct Backends {
    std::unique_ptr<TpuControl> node;   // api or gcloud; may be null.
    std::unique_ptr<TpuControl> local;  // The local backend; may be null.
    std::shared_ptr<WaitClock> clock;   // Required: budget, backoff and maintenance polls.
  };

  // The service for `config` (backend api, gcloud or local) with `policy`, or
  // nullptr for backend "none". With api or gcloud, the local backend (same
  // config's device_globs, lock_file, ...) is added for the local rung.
  // Errors: InvalidArgument from ValidateTpuConfig / ValidateTpuResetPolicy.
  // Does no I/O.
  static absl::StatusOr<std::unique_ptr<TpuRecovery>> Create(boost::asio::io_context& io,
                                                             const TpuConfig& config,
                                                             const TpuResetPolicy& policy, TpuDeps deps = {});

  // `config` supplies timeout_seconds and poll_interval_seconds for the
  // maintenance wait. Starts the worker thread.
  TpuRecovery(boost::asio::io_context& io, TpuConfig config, TpuResetPolicy policy, Backends backends);
  ~TpuRecovery();
  TpuRecovery(const TpuRecovery&) = delete;
  TpuRecovery& operator=(const TpuRecovery&) = delete;

  // Queues the ladder for `request`: Describe the node (when there is a node
  // backend), pick the rung, then, for a rung that acts (local, node reset,
  // node start), check the budget and wait out the backoff. `done` gets
  // attempted=false when the rung is "none" (the log says why) or when a node
  // reset that ended after this request arrived already covered it; attempted
  // with status ResourceExhausted when the budget is spent; otherwise the
  // backend used ("local", "api", "gcloud"; "local,api" when a failed local
  // reset escalated to the node), the reset's duration (backoff wait
  // excluded), and its status. request.spare_pgids are never signalled.
  void Reset(const TpuResetRequest& request, std::function<void(TpuResetResult)> done);

  // A reset by hand (`tpuctl reset-tpu`): `backend` "" means the node backend
  // (the local one without a node backend), "local" the local one, or the
  // node backend's name. No ladder, no budget check, no backoff; it counts
  // against the budget. InvalidArgument (and `done` is never called) for a
  // backend that is not configured; else the reset is queued and its result,
  // failed or not, goes to `done`.
  absl::Status ResetByHand(const std::string& backend, std::vector<int> spare_pgids,
                           std::function<void(TpuResetResult)> done);

  // The node as the node backend sees it, blocking (not on the loop thread).
  // FailedPrecondition without a node backend; else as TpuControl::Describe.
  // `max_age` > 0: the cached node when described that recently, so callers
  // polling together (tpuctl reset-tpu, tpu) cost the API one call per max_age.
  absl::StatusOr<TpuNode> Describe(CancelToken* cancel, Seconds max_age = Seconds::zero()) const;

  // The node as last described (by the ladder, Describe or RefreshNode) and
  // when, on the WaitClock; nullopt before the first answer, and after a node
  // reset or start changed the node. Never blocks on the network.
  std::optional<std::pair<TpuNode, SteadyTime>> CachedNode() const;
  // Queues a Describe on the worker to refresh CachedNode (behind any reset
  // in progress). Nothing without a node backend, or when one is queued.
  void RefreshNode();

  TpuRecoveryStatus Status() const;
  bool has_node_backend() const { return node_ != nullptr; }
  WaitClock& clock() const { return *clock_; }

 private:
  struct Task {
    TpuResetRequest request;
    std::optional<std::string> by_hand;  // Set: ResetByHand with this backend.
    SteadyTime enqueued;
    std::function<void(TpuResetResult)> done;
    bool refresh = false;                // RefreshNode: describe only, no `done`.
  };

  void Enqueue(Task task);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // Stopping, or a task waits.
  void WorkerLoop();
  TpuResetResult RunLadder(const Task& task, CancelToken* cancel);
  TpuResetResult RunByHand(const Task& task, CancelToken* cancel);
  TpuPlan Plan(const Task& task, CancelToken* cancel);
  absl::StatusOr<TpuNode> DescribeAndCache(CancelToken* cancel) const;
  bool CoveredByNodeReset(TpuRung rung, SteadyTime enqueued) const;
  absl::Status Admit(CancelToken* cancel);
  absl::Status ThrottleBeforeReset(CancelToken* cancel);
  TpuResetResult RunWithEscalation(TpuRung rung, const TpuCall& call);
  TpuResetResult RunRung(TpuRung rung, const TpuCall& call);
  absl::Status WaitForMaintenance(const TpuCall& call);
  std::string BackendFor(TpuRung rung) const;
  void Remember(const Task& task, const std::string& rung, const std::string& why, const TpuResetResult& r);

  boost::asio::io_context& io_;
  const TpuConfig config_;
  const std::unique_ptr<TpuControl> node_;
  const std::unique_ptr<TpuControl> local_;
  const std::shared_ptr<WaitClock> clock_;

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  CancelToken* current_cancel_ ABSL_GUARDED_BY(mu_) = nullptr;  // The call in flight.
  std::string running_ ABSL_GUARDED_BY(mu_);
  mutable ResetBudget budget_ ABSL_GUARDED_BY(mu_);
  std::optional<SteadyTime> last_node_reset_end_ ABSL_GUARDED_BY(mu_);  // Of a successful one.
  // Job -> (class, end) of its last successful local reset, for escalation.
  std::map<std::string, std::pair<FailureClass, SteadyTime>> last_local_ ABSL_GUARDED_BY(mu_);
  std::optional<TpuResetRecord> last_ ABSL_GUARDED_BY(mu_);
  mutable std::optional<std::pair<TpuNode, SteadyTime>> node_cache_ ABSL_GUARDED_BY(mu_);
  bool refresh_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::pair<std::string, std::string>, std::int64_t> resets_total_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;                     // Last: started once the rest is built.
};

}  // namespace tpud
