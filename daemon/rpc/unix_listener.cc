#include "daemon/rpc/unix_listener.h"

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpud {
namespace {

absl::Status SocketError(const std::filesystem::path& path, const std::string& what) {
  return absl::ErrnoToStatus(errno, absl::StrCat("socket ", path.string(), ": ", what));
}

// bind, chmod, chown, listen: in that order, so no one connects before the
// file's mode and group are set (connect to a socket not listening is refused).
absl::Status BindAndListen(int fd, const std::filesystem::path& path, mode_t mode, gid_t gid) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.native().size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket ", path.string(), ": path too long"));
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return SocketError(path, "bind");
  absl::Status status;
  if (::chmod(path.c_str(), mode) != 0) {
    status = SocketError(path, absl::StrFormat("chmod %04o", mode));
  } else if (gid != static_cast<gid_t>(-1) && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    status = SocketError(path, absl::StrCat("chown to gid ", gid));
  } else if (::listen(fd, SOMAXCONN) != 0) {
    status = SocketError(path, "listen");
  }
  if (!status.ok()) ::unlink(path.c_str());
  return status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Open(const std::filesystem::path& path,
                                                                 mode_t mode, gid_t gid) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SocketError(path, "socket");
  if (absl::Status s = BindAndListen(fd, path, mode, gid); !s.ok()) {
    ::close(fd);
    return s;
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    absl::Status s = SocketError(path, "eventfd");
    ::close(fd);
    return s;
  }
  return std::unique_ptr<UnixListener>(new UnixListener(fd, wake));
}

UnixListener::~UnixListener() {
  Stop();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void UnixListener::Serve(grpc::Server* server, PeerRegistry* registry, AccessPolicy policy) {
  policy_ = std::move(policy);
  thread_ = std::thread([this, server, registry] { AcceptLoop(server, registry); });
}

void UnixListener::Stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

void UnixListener::AcceptLoop(grpc::Server* server, PeerRegistry* registry) {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("control socket: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    // Non-blocking, as gRPC's endpoints expect.
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      HandOver(fd, server, registry);
    } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      spdlog::warn("control socket: accept: {}; retrying in 100 ms", std::strerror(errno));
      ::poll(nullptr, 0, 100);  // Out of fds: do not spin.
    }
  }
}

void UnixListener::HandOver(int fd, grpc::Server* server, PeerRegistry* registry) {
  absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(fd);
  if (!peer.ok()) return Refuse(fd, static_cast<uid_t>(-1), std::string(peer.status().message()));
  if (absl::Status allowed = AuthorizePeer(*peer, policy_); !allowed.ok()) {
    return Refuse(fd, peer->uid, std::string(allowed.message()));
  }
  if (std::string why = OverLimit(*peer); !why.empty()) return Refuse(fd, peer->uid, why);
  struct stat st {};
  ::fstat(fd, &st);
  if (peer->uid != 0) open_.push_back({fd, st.st_ino, peer->uid});
  registry->Remember(fd, *std::move(peer));
  grpc::AddInsecureChannelFromFd(server, fd);  // gRPC owns fd from here.
}

std::string UnixListener::OverLimit(const PeerCredentials& peer) {
  if (peer.uid == 0) return "";
  // Forget connections gRPC has closed: their fd is gone or names another socket.
  std::erase_if(open_, [](const OpenConnection& open) {
    struct stat st {};
    return ::fstat(open.fd, &st) != 0 || st.st_ino != open.inode;
  });
  int mine = 0;
  for (const OpenConnection& open : open_) mine += open.uid == peer.uid ? 1 : 0;
  if (mine >= limits_.per_uid) {
    return absl::StrCat("uid ", peer.uid, " already has ", mine, " connections open (at most ", limits_.per_uid, ")");
  }
  if (static_cast<int>(open_.size()) >= limits_.non_root_total) {
    return absl::StrCat(open_.size(), " non-root connections are open (at most ", limits_.non_root_total, ")");
  }
  return "";
}

void UnixListener::Refuse(int fd, uid_t uid, const std::string& why) {
  ::close(fd);
  ++refused_;
  const auto now = std::chrono::steady_clock::now();
  auto [last, first] = last_logged_.try_emplace(uid, now);
  if (!first && now - last->second < std::chrono::minutes(1)) return;  // A flood logs once a minute.
  last->second = now;
  spdlog::warn("control socket: connection refused: {} ({} refused so far)", why, refused_.load());
}

}  // namespace tpud
