#include "daemon/rpc/guarded_service.h"

#include <spdlog/spdlog.h>

#include "daemon/rpc/convert.h"
#include "daemon/rpc/request_limits.h"

namespace tpud {

template <typename Request>
grpc::Status GuardedService::Admit(grpc::ServerContext* ctx, const char* method, const Request& req) const {
  const std::string peer = ctx->peer();
  if (absl::Status s = AuthorizeCall(peer, registry_, policy_); !s.ok()) {
    spdlog::warn("{} from {} refused: {}", method, peer, std::string(s.message()));
    return ToGrpcStatus(s);
  }
  if (absl::Status s = CheckRequest(req); !s.ok()) {
    spdlog::debug("{} from {} rejected: {}", method, peer, std::string(s.message()));
    return ToGrpcStatus(s);
  }
  return grpc::Status::OK;
}

grpc::Status GuardedService::StartJob(grpc::ServerContext* ctx, const v1::StartJobRequest* req,
                                      v1::StartJobResponse* resp) {
  if (grpc::Status s = Admit(ctx, "StartJob", *req); !s.ok()) return s;
  return inner_.StartJob(ctx, req, resp);
}

grpc::Status GuardedService::StopJob(grpc::ServerContext* ctx, const v1::StopJobRequest* req,
                                     v1::StopJobResponse* resp) {
  if (grpc::Status s = Admit(ctx, "StopJob", *req); !s.ok()) return s;
  return inner_.StopJob(ctx, req, resp);
}

grpc::Status GuardedService::RestartJob(grpc::ServerContext* ctx, const v1::RestartJobRequest* req,
                                        v1::RestartJobResponse* resp) {
  if (grpc::Status s = Admit(ctx, "RestartJob", *req); !s.ok()) return s;
  return inner_.RestartJob(ctx, req, resp);
}

grpc::Status GuardedService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                    v1::GetJobResponse* resp) {
  if (grpc::Status s = Admit(ctx, "GetJob", *req); !s.ok()) return s;
  return inner_.GetJob(ctx, req, resp);
}

grpc::Status GuardedService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                      v1::ListJobsResponse* resp) {
  if (grpc::Status s = Admit(ctx, "ListJobs", *req); !s.ok()) return s;
  return inner_.ListJobs(ctx, req, resp);
}

grpc::Status GuardedService::WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                                         grpc::ServerWriter<v1::WatchEventsResponse>* writer) {
  if (grpc::Status s = Admit(ctx, "WatchEvents", *req); !s.ok()) return s;
  return inner_.WatchEvents(ctx, req, writer);
}

grpc::Status GuardedService::TailLogs(grpc::ServerContext* ctx, const v1::TailLogsRequest* req,
                                      grpc::ServerWriter<v1::TailLogsResponse>* writer) {
  if (grpc::Status s = Admit(ctx, "TailLogs", *req); !s.ok()) return s;
  return inner_.TailLogs(ctx, req, writer);
}

grpc::Status GuardedService::GetDaemonInfo(grpc::ServerContext* ctx, const v1::GetDaemonInfoRequest* req,
                                           v1::GetDaemonInfoResponse* resp) {
  if (grpc::Status s = Admit(ctx, "GetDaemonInfo", *req); !s.ok()) return s;
  return inner_.GetDaemonInfo(ctx, req, resp);
}

grpc::Status GuardedService::GetTpu(grpc::ServerContext* ctx, const v1::GetTpuRequest* req,
                                    v1::GetTpuResponse* resp) {
  if (grpc::Status s = Admit(ctx, "GetTpu", *req); !s.ok()) return s;
  return inner_.GetTpu(ctx, req, resp);
}

grpc::Status GuardedService::ResetTpu(grpc::ServerContext* ctx, const v1::ResetTpuRequest* req,
                                      v1::ResetTpuResponse* resp) {
  if (grpc::Status s = Admit(ctx, "ResetTpu", *req); !s.ok()) return s;
  return inner_.ResetTpu(ctx, req, resp);
}

grpc::Status GuardedService::Doctor(grpc::ServerContext* ctx, const v1::DoctorRequest* req,
                                    v1::DoctorResponse* resp) {
  if (grpc::Status s = Admit(ctx, "Doctor", *req); !s.ok()) return s;
  return inner_.Doctor(ctx, req, resp);
}

grpc::Status GuardedService::RemoveJob(grpc::ServerContext* ctx, const v1::RemoveJobRequest* req,
                                       v1::RemoveJobResponse* resp) {
  if (grpc::Status s = Admit(ctx, "RemoveJob", *req); !s.ok()) return s;
  return inner_.RemoveJob(ctx, req, resp);
}

}  // namespace tpud
