// Who may use the control socket (daemon/rpc/peer_auth.h), and the
// socket_group/socket_mode config keys (daemon/config/socket_access.h).
#include "daemon/rpc/peer_auth.h"

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "daemon/core/unix_groups.h"
#include "daemon/config/config.h"
#include "daemon/config/socket_access.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;

const AccessPolicy kPolicy{/*daemon_uid=*/998, /*group=*/997, "tpud"};

TEST_CASE("Peer auth: root, the daemon's uid and group members may control jobs", "[peer_auth]") {
  struct Case {
    const char* who;
    PeerCredentials peer;
    bool allowed;
  };
  const Case cases[] = {
      {"root", {1, 0, 0, {}}, true},
      {"the daemon's own uid", {1, 998, 998, {}}, true},
      {"primary group tpud", {1, 1000, 997, {}}, true},
      {"supplementary group tpud", {1, 1000, 1000, {27, 997}}, true},
      {"nobody", {1, 65534, 65534, {}}, false},
      {"other groups only", {1, 1000, 1000, {27, 100}}, false},
  };
  for (const Case& c : cases) {
    INFO(c.who);
    CHECK(AuthorizePeer(c.peer, kPolicy).ok() == c.allowed);
  }
  const absl::Status denied = AuthorizePeer({1, 65534, 65534, {}}, kPolicy);
  CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
  CHECK(denied.message() == "permission denied: uid 65534 is not root nor in group tpud");
}

TEST_CASE("Peer auth: calls are matched to connections by gRPC's \"fd:N\" peer name", "[peer_auth]") {
  PeerRegistry registry;
  registry.Remember(12, {1, 65534, 65534, {}});
  CHECK(AuthorizeCall("fd:12", registry, kPolicy).code() == absl::StatusCode::kPermissionDenied);
  registry.Remember(12, {2, 0, 0, {}});  // fd 12 closed, reused by root's connection.
  CHECK(AuthorizeCall("fd:12", registry, kPolicy).ok());
  for (const char* unknown : {"fd:13", "unix:/run/tpud/tpud.sock", "fd:", "fd:x", ""}) {
    INFO(unknown);
    const absl::Status status = AuthorizeCall(unknown, registry, kPolicy);
    CHECK(status.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(status.message()), Contains("peer credentials unknown"));
  }
}

TEST_CASE("Peer auth: SO_PEERCRED reads this process's own credentials over a socket pair", "[peer_auth]") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  const absl::StatusOr<PeerCredentials> peer = ReadPeerCredentials(fds[0]);
  ::close(fds[0]);
  ::close(fds[1]);
  REQUIRE(peer.ok());
  CHECK(peer->pid == ::getpid());
  CHECK(peer->uid == ::geteuid());
  CHECK(peer->gid == ::getegid());
}

TEST_CASE("Peer auth: the policy defaults to the daemon's own group", "[peer_auth]") {
  const absl::StatusOr<AccessPolicy> own = MakeAccessPolicy("");
  REQUIRE(own.ok());
  CHECK(own->group == ::getegid());
  CHECK(own->daemon_uid == ::geteuid());
  CHECK(own->group_name == GroupName(::getegid()));
  CHECK(MakeAccessPolicy("4242")->group == 4242);
  CHECK(MakeAccessPolicy("no-such-group-tpud-test").status().message() ==
        "no such group \"no-such-group-tpud-test\"");
}

TEST_CASE("Config: socket_mode is octal within 0777", "[peer_auth]") {
  using config_internal::ParseFileMode;
  CHECK(ParseFileMode("0660") == 0660u);
  CHECK(ParseFileMode("660") == 0660u);
  CHECK(ParseFileMode("0o666") == 0666u);
  for (const char* bad : {"", "0x1b6", "0888", "01777", "rw-rw----", "-660"}) {
    INFO(bad);
    CHECK_FALSE(ParseFileMode(bad).has_value());
  }
}

TEST_CASE("Config: socket_group and socket_mode are read, checked and located", "[peer_auth]") {
  testing::TempDir dir("tpud-socket-config");
  const std::string group = GroupName(::getegid());
  absl::StatusOr<DaemonConfig> ok =
      LoadDaemonConfig(dir.File("ok.yaml", "socket_group: " + group + "\nsocket_mode: 0666\n"));
  REQUIRE(ok.ok());
  CHECK(ok->socket_group == group);
  CHECK(ok->socket_mode == 0666u);
  CHECK(LoadDaemonConfig(dir.File("default.yaml", "jobs: []\n"))->socket_mode == 0660u);

  const std::string unknown = dir.File("unknown.yaml", "jobs: []\nsocket_group: no-such-group-tpud-test\n");
  CHECK(LoadDaemonConfig(unknown).status().message() ==
        unknown + ":2: socket_group: no such group \"no-such-group-tpud-test\"");
  const std::string owner = dir.File("owner.yaml", "socket_mode: 0066\n");
  CHECK(LoadDaemonConfig(owner).status().message() ==
        owner + ":1: socket_mode: must give the owner read and write (0600), got \"0066\"");
  const std::string junk = dir.File("junk.yaml", "socket_mode: rw\n");
  CHECK_THAT(std::string(LoadDaemonConfig(junk).status().message()),
             Contains(":1: socket_mode: expected octal"));
}

}  // namespace
}  // namespace tpud
