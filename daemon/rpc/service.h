// The gRPC face of the supervisor: validates each request, runs it on the
// event loop, converts the result. No supervision logic lives here.
#pragma once

#include <boost/asio/io_context.hpp>
#include <string>

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/rpc/peer_auth.h"
#include "daemon/slice/coordinator.h"
#include "daemon/supervisor/supervisor.h"
#include "daemon/tpu/tpu_preflight.h"
#include "daemon/tpu/tpu_recovery.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud {

struct DaemonInfo {
  std::string version;
  std::string metrics_address;
  std::string config_path;
  std::int64_t start_time_unix_ms = 0;
  std::string attempt_cgroups;  // Empty: none.
};

// Streams that follow (`logs -f`, `events -f`) each hold a gRPC thread for as
// long as they last: a bounded number may run at once, per caller and in
// all, with room kept for root. Thread-safety: thread-safe.
class FollowSlots {
 public:
  static constexpr int kPerUid = 16;        // Any one non-root user.
  static constexpr int kNonRootTotal = 48;  // All non-root users together.
  static constexpr int kRootTotal = 16;     // Root, beyond that.

  // A held slot; released when destroyed.
  using Slot = std::shared_ptr<void>;
  // A slot for `uid`, or ResourceExhausted saying which limit was reached.
  absl::StatusOr<Slot> Acquire(std::uint32_t uid);

 private:
  absl::Mutex mu_;
  std::map<std::uint32_t, int> by_uid_ ABSL_GUARDED_BY(mu_);
  int non_root_ ABSL_GUARDED_BY(mu_) = 0;
};

// The handler of each RPC of tpud.v1.Supervisor. Not itself a gRPC service:
// AdmittedService (admission.h) is, and calls these once a call is admitted,
// so requests arrive here within request_limits.h.
//
// Thread-safety: gRPC calls the handlers on its own threads; each reaches the
// supervisor only through RunOnLoop. `io` must keep running until the server
// has shut down.
class SupervisorService final {
 public:
  // `peers` (may be null: every caller is root, as in tests without a
  // socket) names the caller of each call.
  SupervisorService(boost::asio::io_context& io, Supervisor& supervisor, DaemonInfo info,
                    const PeerRegistry* peers = nullptr)
      : io_(io), supervisor_(supervisor), info_(std::move(info)), peers_(peers) {}

  grpc::Status StartJob(grpc::ServerContext* ctx, const v1::StartJobRequest* req,
                        v1::StartJobResponse* resp);
  grpc::Status StopJob(grpc::ServerContext* ctx, const v1::StopJobRequest* req,
                       v1::StopJobResponse* resp);
  grpc::Status RestartJob(grpc::ServerContext* ctx, const v1::RestartJobRequest* req,
                          v1::RestartJobResponse* resp);
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::GetJobResponse* resp);
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp);
  grpc::Status WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                           grpc::ServerWriter<v1::WatchEventsResponse>* writer);
  grpc::Status TailLogs(grpc::ServerContext* ctx, const v1::TailLogsRequest* req,
                        grpc::ServerWriter<v1::TailLogsResponse>* writer);
  grpc::Status GetDaemonInfo(grpc::ServerContext* ctx, const v1::GetDaemonInfoRequest* req,
                             v1::GetDaemonInfoResponse* resp);
  grpc::Status RemoveJob(grpc::ServerContext* ctx, const v1::RemoveJobRequest* req,
                         v1::RemoveJobResponse* resp);

  // The TPU RPCs (daemon/rpc/tpu_service.cc). `backend` is tpu.reset.backend;
  // `recovery` (null for none) and `checks` must outlive the service. Call
  // before serving.
  void SetTpu(std::string backend, TpuRecovery* recovery, const TpuPreflight* checks) {
    tpu_backend_ = std::move(backend);
    tpu_recovery_ = recovery;
    tpu_checks_ = checks;
  }
  // Describes the node now (blocking this gRPC thread, not the loop).
  grpc::Status GetTpu(grpc::ServerContext* ctx, const v1::GetTpuRequest* req, v1::GetTpuResponse* resp);
  // Resets by hand and answers once the reset is done, failed or not.
  grpc::Status ResetTpu(grpc::ServerContext* ctx, const v1::ResetTpuRequest* req,
                        v1::ResetTpuResponse* resp);
  grpc::Status Doctor(grpc::ServerContext* ctx, const v1::DoctorRequest* req, v1::DoctorResponse* resp);

  // The slice (daemon/rpc/slice_service.cc). `coordinator` and `etcd` (null
  // without a `slice:` section) must outlive the service; `endpoints` are
  // slice.etcd.endpoints. Call before serving.
  void SetSlice(const slice::Coordinator* coordinator, etcd::EtcdClient* etcd, std::vector<std::string> endpoints) {
    slice_ = coordinator;
    etcd_ = etcd;
    etcd_endpoints_ = std::move(endpoints);
  }
  grpc::Status GetSlice(grpc::ServerContext* ctx, const v1::GetSliceRequest* req, v1::GetSliceResponse* resp);

  // Incident bundles under `dir` (state_dir/incidents). Call before serving.
  void SetIncidents(std::filesystem::path dir) { incidents_dir_ = std::move(dir); }
  // Reads the bundle on this gRPC thread (files, not the loop).
  grpc::Status GetIncident(grpc::ServerContext* ctx, const v1::GetIncidentRequest* req,
                           v1::GetIncidentResponse* resp);

 private:
  absl::StatusOr<JobSpec> SpecFromRequest(const v1::StartJobRequest& req) const;
  // The caller of this call; nullopt for root or when peers are not tracked.
  std::optional<Caller> CallerOf(grpc::ServerContext* ctx) const;
  // A follow slot for the caller, or the gRPC error to answer.
  absl::StatusOr<FollowSlots::Slot> FollowSlot(grpc::ServerContext* ctx);

  boost::asio::io_context& io_;
  Supervisor& supervisor_;
  const DaemonInfo info_;
  const PeerRegistry* peers_;
  FollowSlots follow_slots_;
  std::string tpu_backend_ = "none";
  TpuRecovery* tpu_recovery_ = nullptr;
  const TpuPreflight* tpu_checks_ = nullptr;
  // A gang job's status gets the whole gang (GangStatus) from the slice.
  void AddGang(v1::JobStatus* job) const;
  // Per (gang job, other worker): the (time_unix_ms, sequence) of the newest
  // event sent. Time first: a worker's sequence starts again after its tpud
  // restarts, and its restored events keep their times.
  using PeerCursor = std::map<std::pair<std::string, int>, std::pair<std::int64_t, std::int64_t>>;
  // The other workers' events of gang `job` (every gang when empty) newer
  // than `seen`, oldest first; updates `seen`.
  std::vector<v1::WatchEventsResponse> PeerEvents(const std::string& job, PeerCursor& seen) const;
  // This worker's id in the slice; nullopt without one.
  std::optional<int> SliceWorker() const;
  // Doctor's slice checks: etcd reachable, every worker a member.
  void AddSliceChecks(v1::DoctorResponse* resp) const;
  const slice::Coordinator* slice_ = nullptr;
  etcd::EtcdClient* etcd_ = nullptr;
  std::vector<std::string> etcd_endpoints_;
  std::filesystem::path incidents_dir_;
};

}  // namespace tpud
