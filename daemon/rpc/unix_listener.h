// The control socket: a unix stream socket tpud accepts on itself, so that it
// knows each connection's peer credentials (peer_auth.h), before handing the
// connection to the gRPC server.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/rpc/peer_auth.h"

namespace grpc {
class Server;
}

namespace tpud {

// Thread-safety: Open, Serve, Stop and the destructor from one thread; the
// accept loop runs on a thread of its own.
class UnixListener {
 public:
  // Binds a unix stream socket at `path` (which must not exist: see
  // ClaimSocketPath in daemon_app.cc), sets the file's permission bits to
  // `mode` and its group to `gid` (-1: leave it), then listens. Nobody can
  // connect before the mode and group are in place. Errors name the path and
  // the failing call, e.g. "socket /run/tpud/tpud.sock: chown to gid 1001:
  // Operation not permitted". The socket file is removed again on error.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Open(const std::filesystem::path& path, mode_t mode,
                                                            gid_t gid);
  ~UnixListener();  // Stop(), then closes the listening socket (the file stays).
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Starts accepting: each connection's peer credentials go to `registry`,
  // then the connection goes to `server` (grpc::AddInsecureChannelFromFd).
  // A connection whose credentials cannot be read is closed and logged.
  // `server` (started) and `registry` must outlive Stop(). Call at most once.
  void Serve(grpc::Server* server, PeerRegistry* registry);
  // Stops accepting and waits for the accept thread. Connections already
  // handed over stay with the server. Idempotent; call before the server
  // shuts down.
  void Stop();

 private:
  UnixListener(int listen_fd, int wake_fd) : listen_fd_(listen_fd), wake_fd_(wake_fd) {}
  void AcceptLoop(grpc::Server* server, PeerRegistry* registry);
  void HandOver(int fd, grpc::Server* server, PeerRegistry* registry);

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // An eventfd; Stop() makes it readable.
  std::thread thread_;
};

}  // namespace tpud
