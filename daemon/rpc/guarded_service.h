// The gate in front of the control API: every call is first checked for who
// makes it (peer_auth.h: PERMISSION_DENIED) and for what it asks
// (request_limits.h: INVALID_ARGUMENT); only then does it reach the service
// it wraps (SupervisorService). Nothing else happens here.
#pragma once

#include "daemon/rpc/peer_auth.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud {

// Thread-safety: as the wrapped service; `inner` and `registry` must outlive it.
class GuardedService final : public v1::Supervisor::Service {
 public:
  GuardedService(v1::Supervisor::Service& inner, const PeerRegistry& registry, AccessPolicy policy)
      : inner_(inner), registry_(registry), policy_(std::move(policy)) {}

  grpc::Status StartJob(grpc::ServerContext* ctx, const v1::StartJobRequest* req,
                        v1::StartJobResponse* resp) override;
  grpc::Status StopJob(grpc::ServerContext* ctx, const v1::StopJobRequest* req,
                       v1::StopJobResponse* resp) override;
  grpc::Status RestartJob(grpc::ServerContext* ctx, const v1::RestartJobRequest* req,
                          v1::RestartJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::GetJobResponse* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                           grpc::ServerWriter<v1::WatchEventsResponse>* writer) override;
  grpc::Status TailLogs(grpc::ServerContext* ctx, const v1::TailLogsRequest* req,
                        grpc::ServerWriter<v1::TailLogsResponse>* writer) override;
  grpc::Status GetDaemonInfo(grpc::ServerContext* ctx, const v1::GetDaemonInfoRequest* req,
                             v1::GetDaemonInfoResponse* resp) override;
  grpc::Status GetTpu(grpc::ServerContext* ctx, const v1::GetTpuRequest* req,
                      v1::GetTpuResponse* resp) override;
  grpc::Status ResetTpu(grpc::ServerContext* ctx, const v1::ResetTpuRequest* req,
                        v1::ResetTpuResponse* resp) override;
  grpc::Status Doctor(grpc::ServerContext* ctx, const v1::DoctorRequest* req,
                      v1::DoctorResponse* resp) override;
  grpc::Status RemoveJob(grpc::ServerContext* ctx, const v1::RemoveJobRequest* req,
                         v1::RemoveJobResponse* resp) override;

 private:
  // OK when the caller may call `method` with `req`; else the status to send.
  template <typename Request>
  grpc::Status Admit(grpc::ServerContext* ctx, const char* method, const Request& req) const;

  v1::Supervisor::Service& inner_;
  const PeerRegistry& registry_;
  const AccessPolicy policy_;
};

}  // namespace tpud
