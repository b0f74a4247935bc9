// The one way into the control API. Every RPC of tpud.v1.Supervisor is a row
// of one table (admission.cc); each row's handler first admits the call (the
// caller: peer_auth.h, PERMISSION_DENIED; the request: request_limits.h,
// INVALID_ARGUMENT), and only then calls SupervisorService's method for it.
//
// Nothing can go around it: SupervisorService is not a gRPC service (a method
// missing there does not compile, rather than answering UNIMPLEMENTED), and
// the table is checked against the proto's service descriptor when the
// service is built, so an RPC added to tpud.proto without a row stops tpud
// from starting (and the test suite) instead of answering UNIMPLEMENTED.
#pragma once

#include <grpcpp/impl/service_type.h>

#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/rpc/peer_auth.h"
#include "daemon/rpc/service.h"

namespace google::protobuf {
class ServiceDescriptor;
}  // namespace google::protobuf

namespace tpud {

// One RPC a service serves: its short name and the full names of the
// messages its handler takes and returns.
struct ServedMethod {
  std::string name;           // "StartJob"
  std::string request_type;   // "tpud.v1.StartJobRequest"
  std::string response_type;  // "tpud.v1.StartJobResponse"
};

// OK when `served` is exactly the RPCs of `service` (null: not compiled in)
// with its message types; else FailedPrecondition naming each difference:
// "rpc tpud.v1.Supervisor.Frobnicate has no handler".
absl::Status CheckServiceCoverage(const google::protobuf::ServiceDescriptor* service,
                                  const std::vector<ServedMethod>& served);

// Thread-safety: as SupervisorService; `handlers` and `registry` must outlive
// it. `registry` null: every caller is admitted (tests without a socket).
class AdmittedService final : public grpc::Service {
 public:
  AdmittedService(SupervisorService& handlers, const PeerRegistry* registry, AccessPolicy policy);

  // CheckServiceCoverage of the rows against tpud.v1.Supervisor as compiled.
  absl::Status Coverage() const { return coverage_; }

  // The full names ("/tpud.v1.Supervisor/StartJob") of the RPCs served.
  const std::deque<std::string>& methods() const { return names_; }

  // OK when the caller behind `grpc_peer` (ServerContext::peer()) may use
  // tpud; PermissionDenied otherwise (AuthorizeCall).
  absl::Status Authorize(const std::string& grpc_peer) const;

 private:
  template <typename Request, typename Response>
  void Unary(const char* name, grpc::Status (SupervisorService::*method)(grpc::ServerContext*, const Request*,
                                                                          Response*));
  template <typename Request, typename Response>
  void Streaming(const char* name,
                 grpc::Status (SupervisorService::*method)(grpc::ServerContext*, const Request*,
                                                           grpc::ServerWriter<Response>*));
  // The admission of one call: `method` is the RPC's short name, for logs.
  template <typename Request>
  grpc::Status Admit(grpc::ServerContext* ctx, const char* method, const Request& req) const;
  // Records a row; returns its full name ("/tpud.v1.Supervisor/StartJob").
  const char* Note(const char* name, const std::string& request_type, const std::string& response_type);

  SupervisorService& handlers_;
  const PeerRegistry* registry_;
  const AccessPolicy policy_;
  std::deque<std::string> names_;  // A deque: gRPC keeps pointers to the names.
  std::vector<ServedMethod> served_;
  absl::Status coverage_;
};

}  // namespace tpud
