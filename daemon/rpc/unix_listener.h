// The control socket: a unix stream socket tpud accepts on itself, so that it
// knows each connection's peer credentials (peer_auth.h), before handing the
// connection to the gRPC server.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
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

  // Starts accepting: each connection's peer credentials are read and
  // checked against `policy` first. A peer the policy refuses, or whose
  // credentials cannot be read, is closed at once, before gRPC sees a byte
  // (logged once a minute per uid; counted in refused()). So is a
  // connection past the limits: ConnectionLimits. An admitted connection's
  // credentials go to `registry` and the connection to `server`
  // (grpc::AddInsecureChannelFromFd). `server` (started) and `registry` must
  // outlive Stop(). Call at most once.
  void Serve(grpc::Server* server, PeerRegistry* registry, AccessPolicy policy);

  // Open connections allowed at once: per non-root uid, and for all non-root
  // uids together. Root has no limit of its own (only the fd limit, which
  // tpud's unit raises), so it can always get in to repair things.
  struct ConnectionLimits {
    int per_uid = 64;
    int non_root_total = 512;
  };
  void set_limits(ConnectionLimits limits) { limits_ = limits; }
  // Connections closed at accept so far (refused peers and limits).
  std::uint64_t refused() const { return refused_.load(); }
  // Stops accepting and waits for the accept thread. Connections already
  // handed over stay with the server. Idempotent; call before the server
  // shuts down.
  void Stop();

 private:
  // A connection handed to gRPC: gRPC closes the fd when it is done, so the
  // listener tells a live one by the fd still naming the same socket inode.
  struct OpenConnection {
    int fd;
    ino_t inode;
    uid_t uid;
  };

  UnixListener(int listen_fd, int wake_fd) : listen_fd_(listen_fd), wake_fd_(wake_fd) {}
  void AcceptLoop(grpc::Server* server, PeerRegistry* registry);
  void HandOver(int fd, grpc::Server* server, PeerRegistry* registry);
  // Why `peer` may not open another connection now; empty when it may.
  std::string OverLimit(const PeerCredentials& peer);
  void Refuse(int fd, uid_t uid, const std::string& why);

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // An eventfd; Stop() makes it readable.
  std::thread thread_;
  AccessPolicy policy_;
  ConnectionLimits limits_;
  std::vector<OpenConnection> open_;  // Accept thread only.
  std::map<uid_t, std::chrono::steady_clock::time_point> last_logged_;  // Accept thread only.
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace tpud
