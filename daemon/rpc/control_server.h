// The control API's server: the unix socket (unix_listener.h), the one way in
// to the handlers (admission.h), gRPC's message size limit and the
// decode-error interceptor (decode_errors.h), assembled in one place.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/config/config.h"
#include "daemon/rpc/admission.h"
#include "daemon/rpc/peer_auth.h"
#include "daemon/rpc/unix_listener.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud {

// Thread-safety: Start, Shutdown and the destructor from one thread; gRPC
// runs the service on its own threads.
class ControlServer {
 public:
  // Listens on config.socket (which must not exist) with config.socket_mode
  // and config.socket_group, and serves `service` there to the callers
  // AuthorizePeer admits. `service` must outlive the ControlServer.
  // Errors: an unknown group; a socket that cannot be bound, chmod-ed,
  // chown-ed or listened on (the message names the path and the call); an
  // RPC of the proto without a handler (AdmittedService::Coverage).
  // `registry` receives the credentials of each admitted connection; the
  // service reads callers from it.
  static absl::StatusOr<std::unique_ptr<ControlServer>> Start(const DaemonConfig& config,
                                                              SupervisorService& service,
                                                              PeerRegistry& registry);
  ~ControlServer();  // Shutdown() now, if not yet done.
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Stops accepting connections, then shuts the gRPC server down, cancelling
  // calls still running at `deadline`. Idempotent.
  void Shutdown(std::chrono::system_clock::time_point deadline);

  const AccessPolicy& policy() const { return policy_; }

 private:
  ControlServer(AccessPolicy policy, SupervisorService& service, PeerRegistry& registry);

  const AccessPolicy policy_;
  PeerRegistry& registry_;
  AdmittedService admitted_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<UnixListener> listener_;
  bool shut_down_ = false;
};

}  // namespace tpud
