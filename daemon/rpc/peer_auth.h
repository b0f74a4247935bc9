// Who is calling: the credentials of the process at the other end of a unix
// socket connection (SO_PEERCRED, SO_PEERGROUPS: unix(7), socket(7)) and the
// decision whether it may use tpud.
//
// gRPC C++ does not expose the peer's credentials for unix sockets (the auth
// context is empty: grpc/grpc#15511, #28755). So tpud accepts connections
// itself (unix_listener.h), reads each peer's credentials, remembers them under
// the connection's fd and hands the fd to gRPC (grpc::AddInsecureChannelFromFd),
// which then names the call's peer "fd:N" (ServerContext::peer(); the name is
// set in grpc_server_add_insecure_channel_from_fd, src/core/ext/transport/
// chttp2/server/insecure/server_chttp2_posix.cc). gRPC closes fd N only when
// the transport is destroyed (~grpc_chttp2_transport destroys the endpoint,
// chttp2_transport.cc), and each of its streams holds a reference to it; so
// while a call runs, "fd:N" names its own connection and no later one.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpud {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;              // Effective gid at connect time.
  std::vector<gid_t> groups;  // Supplementary groups at connect time.
};

// Who may control jobs: root, `daemon_uid`, and members of `group`.
struct AccessPolicy {
  uid_t daemon_uid = 0;
  gid_t group = 0;
  std::string group_name;  // For messages.
};

// The policy for `socket_group` (config.h): that group, or the daemon's own
// effective group when empty. Errors: InvalidArgument for an unknown group.
absl::StatusOr<AccessPolicy> MakeAccessPolicy(const std::string& socket_group);

// OK when `peer` is root, has the daemon's uid, or has `policy.group` as its
// gid or a supplementary group. Otherwise PermissionDenied:
//   "permission denied: uid 65534 is not root nor in group tpud"
absl::Status AuthorizePeer(const PeerCredentials& peer, const AccessPolicy& policy);

// The credentials of the peer of the connected unix socket `fd`. Supplementary
// groups come from SO_PEERGROUPS (Linux >= 4.13); where that is missing, from
// the group database for the peer's uid. Errors: the getsockopt errno.
absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd);

// Peer credentials by connection, filled by the listener, read by handlers.
// Thread-safety: thread-safe.
class PeerRegistry {
 public:
  // Records the peer of the connection on `fd`, replacing what an earlier
  // (closed) connection with the same fd number left.
  void Remember(int fd, PeerCredentials peer);
  // The peer behind a gRPC peer name "fd:N"; nullopt for any other name or
  // an fd never remembered.
  std::optional<PeerCredentials> Find(const std::string& grpc_peer) const;

 private:
  mutable absl::Mutex mu_;
  std::map<int, PeerCredentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

// AuthorizePeer for the call whose ServerContext::peer() is `grpc_peer`.
// An unknown peer is refused: PermissionDenied "permission denied: peer
// credentials unknown for <peer>".
absl::Status AuthorizeCall(const std::string& grpc_peer, const PeerRegistry& registry,
                           const AccessPolicy& policy);

}  // namespace tpud
