#include "daemon/rpc/peer_auth.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/unix_groups.h"

namespace tpud {
namespace {

// SO_PEERGROUPS: the peer's supplementary groups (socket(7), Linux 4.13).
absl::StatusOr<std::vector<gid_t>> ReadPeerGroups(int fd) {
#ifdef SO_PEERGROUPS
  std::vector<gid_t> groups(64);
  while (true) {
    socklen_t size = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &size) == 0) {
      groups.resize(size / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE || size <= groups.size() * sizeof(gid_t)) break;
    groups.resize(size / sizeof(gid_t));  // ERANGE reports the size needed.
  }
#else
  errno = ENOPROTOOPT;
#endif
  return absl::ErrnoToStatus(errno, "getsockopt SO_PEERGROUPS");
}

// The groups the group database gives `uid` (for kernels without SO_PEERGROUPS).
std::vector<gid_t> DatabaseGroups(uid_t uid, gid_t gid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) return {};
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (::getgrouplist(found->pw_name, gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    if (::getgrouplist(found->pw_name, gid, groups.data(), &count) < 0) return {};
  }
  groups.resize(static_cast<std::size_t>(count));
  return groups;
}

}  // namespace

absl::StatusOr<AccessPolicy> MakeAccessPolicy(const std::string& socket_group) {
  AccessPolicy policy;
  policy.daemon_uid = ::geteuid();
  if (socket_group.empty()) {
    policy.group = ::getegid();
  } else {
    absl::StatusOr<gid_t> gid = LookUpGroup(socket_group);
    if (!gid.ok()) return gid.status();
    policy.group = *gid;
  }
  policy.group_name = GroupName(policy.group);
  return policy;
}

absl::Status AuthorizePeer(const PeerCredentials& peer, const AccessPolicy& policy) {
  if (peer.uid == 0 || peer.uid == policy.daemon_uid || peer.gid == policy.group) return absl::OkStatus();
  if (std::find(peer.groups.begin(), peer.groups.end(), policy.group) != peer.groups.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("permission denied: uid ", peer.uid, " is not root nor in group ", policy.group_name));
}

absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd) {
  ucred cred{};
  socklen_t size = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) {
    return absl::ErrnoToStatus(errno, "getsockopt SO_PEERCRED");
  }
  PeerCredentials peer{cred.pid, cred.uid, cred.gid, {}};
  absl::StatusOr<std::vector<gid_t>> groups = ReadPeerGroups(fd);
  peer.groups = groups.ok() ? std::move(*groups) : DatabaseGroups(cred.uid, cred.gid);
  return peer;
}

void PeerRegistry::Remember(int fd, PeerCredentials peer) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = std::move(peer);
}

std::optional<PeerCredentials> PeerRegistry::Find(const std::string& grpc_peer) const {
  int fd = -1;
  if (!absl::StartsWith(grpc_peer, "fd:") || !absl::SimpleAtoi(grpc_peer.substr(3), &fd)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

absl::Status AuthorizeCall(const std::string& grpc_peer, const PeerRegistry& registry,
                           const AccessPolicy& policy) {
  const std::optional<PeerCredentials> peer = registry.Find(grpc_peer);
  if (!peer) {
    return absl::PermissionDeniedError(
        absl::StrCat("permission denied: peer credentials unknown for \"", grpc_peer, "\""));
  }
  return AuthorizePeer(*peer, policy);
}

}  // namespace tpud
