#include "daemon/rpc/control_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/rpc/decode_errors.h"
#include "daemon/rpc/request_limits.h"

namespace tpud {

ControlServer::ControlServer(AccessPolicy policy, SupervisorService& service, PeerRegistry& registry)
    : policy_(std::move(policy)), registry_(registry), admitted_(service, &registry_, policy_) {}

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(const DaemonConfig& config,
                                                                    SupervisorService& service,
                                                                    PeerRegistry& registry) {
  absl::StatusOr<AccessPolicy> policy = MakeAccessPolicy(config.socket_group);
  if (!policy.ok())
    return absl::InvalidArgumentError(absl::StrCat("socket_group: ", policy.status().message()));
  const gid_t gid = config.socket_group.empty() ? static_cast<gid_t>(-1) : policy->group;
  std::unique_ptr<ControlServer> control(new ControlServer(*std::move(policy), service, registry));
  if (absl::Status coverage = control->admitted_.Coverage(); !coverage.ok()) return coverage;
  absl::StatusOr<std::unique_ptr<UnixListener>> listener =
      UnixListener::Open(config.socket, static_cast<mode_t>(config.socket_mode), gid);
  if (!listener.ok()) return listener.status();
  grpc::ServerBuilder builder;  // No listening port: connections come from the listener.
  builder.RegisterService(&control->admitted_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxTransportMessageBytes));
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  const AdmittedService* admitted = &control->admitted_;
  interceptors.push_back(
      MakeDecodeErrorInterceptorFactory([admitted](const std::string& peer) { return admitted->Authorize(peer); }));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  control->server_ = builder.BuildAndStart();
  if (!control->server_) {
    return absl::UnavailableError(
        absl::StrCat("socket ", config.socket.string(), ": cannot start the gRPC server"));
  }
  control->listener_ = *std::move(listener);
  control->listener_->Serve(control->server_.get(), &control->registry_, control->policy_);
  spdlog::info("control socket {}: mode {:04o}; root, uid {} and group {} may use it", config.socket.string(),
               config.socket_mode, control->policy_.daemon_uid, control->policy_.group_name);
  return control;
}

ControlServer::~ControlServer() { Shutdown(std::chrono::system_clock::now()); }

void ControlServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  if (listener_) listener_->Stop();
  if (server_) server_->Shutdown(deadline);
}

}  // namespace tpud
