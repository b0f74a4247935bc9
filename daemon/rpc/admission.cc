#include "daemon/rpc/admission.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/impl/codegen/method_handler.h>
#include <grpcpp/impl/codegen/rpc_service_method.h>
#include <spdlog/spdlog.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/rpc/convert.h"
#include "daemon/rpc/request_limits.h"

namespace tpud {
namespace {

constexpr char kServiceName[] = "tpud.v1.Supervisor";

}  // namespace

AdmittedService::AdmittedService(SupervisorService& handlers, const PeerRegistry* registry, AccessPolicy policy)
    : handlers_(handlers), registry_(registry), policy_(std::move(policy)) {
  // One row per RPC; the handler's signature fixes the request and response
  // types, and a CheckRequest overload must exist for the request.
  Unary("StartJob", &SupervisorService::StartJob);
  Unary("StopJob", &SupervisorService::StopJob);
  Unary("RestartJob", &SupervisorService::RestartJob);
  Unary("RemoveJob", &SupervisorService::RemoveJob);
  Unary("GetJob", &SupervisorService::GetJob);
  Unary("ListJobs", &SupervisorService::ListJobs);
  Streaming("WatchEvents", &SupervisorService::WatchEvents);
  Streaming("TailLogs", &SupervisorService::TailLogs);
  Unary("GetDaemonInfo", &SupervisorService::GetDaemonInfo);
  Unary("GetTpu", &SupervisorService::GetTpu);
  Unary("ResetTpu", &SupervisorService::ResetTpu);
  Unary("Doctor", &SupervisorService::Doctor);
  Unary("GetSlice", &SupervisorService::GetSlice);
  Unary("GetIncident", &SupervisorService::GetIncident);

  coverage_ = CheckServiceCoverage(
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(kServiceName), served_);
}

const char* AdmittedService::Note(const char* name, const std::string& request_type,
                                  const std::string& response_type) {
  served_.push_back(ServedMethod{name, request_type, response_type});
  names_.push_back(absl::StrCat("/", kServiceName, "/", name));
  return names_.back().c_str();
}

absl::Status CheckServiceCoverage(const google::protobuf::ServiceDescriptor* service,
                                  const std::vector<ServedMethod>& served) {
  if (service == nullptr) return absl::FailedPreconditionError("the service is not in the compiled proto");
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const ServedMethod& row : served) {
    if (!seen.insert(row.name).second) problems.push_back(absl::StrCat("rpc ", row.name, " has two handlers"));
    const google::protobuf::MethodDescriptor* method = service->FindMethodByName(row.name);
    if (method == nullptr) {
      problems.push_back(absl::StrCat("rpc ", service->full_name(), ".", row.name, " is served but not in the proto"));
    } else if (method->input_type()->full_name() != row.request_type ||
               method->output_type()->full_name() != row.response_type) {
      problems.push_back(absl::StrCat("rpc ", method->full_name(), " takes ", method->input_type()->full_name(),
                                      " and returns ", method->output_type()->full_name(), "; its handler takes ",
                                      row.request_type, " and returns ", row.response_type));
    }
  }
  for (int i = 0; i < service->method_count(); ++i) {
    if (seen.count(service->method(i)->name()) == 0) {
      problems.push_back(absl::StrCat("rpc ", service->method(i)->full_name(), " has no handler"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrJoin(problems, "; "));
}

absl::Status AdmittedService::Authorize(const std::string& grpc_peer) const {
  if (registry_ == nullptr) return absl::OkStatus();
  return AuthorizeCall(grpc_peer, *registry_, policy_);
}

template <typename Request>
grpc::Status AdmittedService::Admit(grpc::ServerContext* ctx, const char* method, const Request& req) const {
  const std::string peer = ctx->peer();
  if (absl::Status s = Authorize(peer); !s.ok()) {
    spdlog::warn("{} from {} refused: {}", method, peer, std::string(s.message()));
    return ToGrpcStatus(s);
  }
  if (absl::Status s = CheckRequest(req); !s.ok()) {
    spdlog::debug("{} from {} rejected: {}", method, peer, std::string(s.message()));
    return ToGrpcStatus(s);
  }
  return grpc::Status::OK;
}

// What the generated v1::Supervisor::Service constructor does for each RPC
// (grpc_cpp_plugin output: AddMethod with an RpcMethodHandler), with the
// admission in front of the call.
template <typename Request, typename Response>
void AdmittedService::Unary(const char* name, grpc::Status (SupervisorService::*method)(grpc::ServerContext*,
                                                                                         const Request*, Response*)) {
  const char* path = Note(name, Request::descriptor()->full_name(), Response::descriptor()->full_name());
  AddMethod(new grpc::internal::RpcServiceMethod(
      path, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<AdmittedService, Request, Response, grpc::protobuf::MessageLite,
                                           grpc::protobuf::MessageLite>(
          [name, method](AdmittedService* self, grpc::ServerContext* ctx, const Request* req, Response* resp) {
            if (grpc::Status s = self->Admit(ctx, name, *req); !s.ok()) return s;
            return (self->handlers_.*method)(ctx, req, resp);
          },
          this)));
}

template <typename Request, typename Response>
void AdmittedService::Streaming(const char* name,
                                grpc::Status (SupervisorService::*method)(grpc::ServerContext*, const Request*,
                                                                          grpc::ServerWriter<Response>*)) {
  const char* path = Note(name, Request::descriptor()->full_name(), Response::descriptor()->full_name());
  AddMethod(new grpc::internal::RpcServiceMethod(
      path, grpc::internal::RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<AdmittedService, Request, Response>(
          [name, method](AdmittedService* self, grpc::ServerContext* ctx, const Request* req,
                         grpc::ServerWriter<Response>* writer) {
            if (grpc::Status s = self->Admit(ctx, name, *req); !s.ok()) return s;
            return (self->handlers_.*method)(ctx, req, writer);
          },
          this)));
}

}  // namespace tpud
