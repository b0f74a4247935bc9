// Members dying, pausing and coming back: the client fails over, never hangs
// past its deadline, and works again when etcd does.
#include <catch2/catch.hpp>

#include "tests/etcd/etcd_test_util.h"

namespace tpud::etcd::testing {
namespace {

bool Unreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable || status.code() == absl::StatusCode::kDeadlineExceeded;
}

TEST_CASE("etcd failover: after the leader is killed, reads go on at once and writes after re-election",
          "[etcd]") {
  tpud::testing::EtcdCluster cluster(3);
  const int leader = cluster.Leader();
  // The client talks to the leader first, so it must fail over.
  auto client = Connect({cluster.endpoint(leader), cluster.endpoint((leader + 1) % 3),
                         cluster.endpoint((leader + 2) % 3)});
  REQUIRE(client->Put("/tpud/gang/generation", "1").ok());

  cluster.Kill(leader);
  const auto killed = std::chrono::steady_clock::now();
  const absl::StatusOr<RangeResult> read = client->Get("/tpud/gang/generation");  // Retried within its deadline.
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  CHECK(read->kvs.at(0).value == "1");

  // A write sent before the followers notice may end "(outcome unknown)";
  // none may outlast its deadline, and one succeeds once a leader is elected.
  bool written = false;
  while (!written && SecondsSince(killed) < 15) {
    const auto start = std::chrono::steady_clock::now();
    const absl::StatusOr<int64_t> put = client->Put("/tpud/gang/generation", "2");
    CHECK(SecondsSince(start) < 6.0);
    written = put.ok();
    if (!written) CHECK(Unreachable(put.status()));
  }
  REQUIRE(written);
  for (int i = 0; i < 20; ++i) {  // Then everything works.
    REQUIRE(client->Put("/tpud/gang/step", std::to_string(i)).ok());
    REQUIRE(client->Get("/tpud/gang/step")->kvs.at(0).value == std::to_string(i));
    REQUIRE(client->Commit(Txn().If(Compare::Value("/tpud/gang/step", Compare::kEqual, std::to_string(i)))
                               .Then(TxnOp::Put("/tpud/gang/ack", std::to_string(i))))
                ->succeeded);
  }
  const int new_leader = cluster.Leader();
  CHECK(new_leader != leader);
}

TEST_CASE("etcd down: with its only member paused, calls fail within their deadline, then work after resume",
          "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints(), 1000ms);
  REQUIRE(client->Put("/k", "v").ok());
  cluster.Pause(0);

  auto timed = [](const std::function<absl::Status()>& call) {
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = call();
    INFO(status.ToString());
    CHECK(Unreachable(status));
    CHECK(SecondsSince(start) < 2.0);  // request_timeout 1 s, plus scheduling slack.
    return std::string(status.message());
  };
  const std::string put = timed([&] { return client->Put("/k", "w").status(); });
  CHECK_THAT(put,
             Catch::StartsWith("etcd " + cluster.endpoint(0) + ": Put: ") && Catch::Contains("outcome unknown"));
  timed([&] { return client->Get("/k").status(); });
  timed([&] { return client->Commit(Txn().Then(TxnOp::Put("/k", "x"))).status(); });
  timed([&] { return client->GrantLease(5s).status(); });
  timed([&] { return client->CheckHealth(); });
  timed([&] { return client->Status(cluster.endpoint(0)).status(); });
  UpdateLog log;
  timed([&] { return client->Watch({"/k", false, 0, false}, log.Callback()).status(); });

  cluster.Resume(0);
  // The Put and the Commit that timed out may still be applied after the resume, in any order against a new
  // write to "/k" ("outcome unknown" above): that is etcd's contract, so the check writes a key they never
  // touched.
  CHECK(WaitUntil([&] { return client->Put("/after", "1").ok(); }, 5000ms));
  CHECK(client->Get("/after")->kvs.at(0).value == "1");
  CHECK(WaitUntil([&] { return client->Put("/k", "after").ok(); }, 5000ms));
}

TEST_CASE("etcd down: with its only member killed, calls fail UNAVAILABLE, a watch resumes after restart",
          "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints(), 1000ms);
  UpdateLog log;
  auto watcher = client->Watch({"/tpud/", true, 0, false}, log.Callback());
  REQUIRE(watcher.ok());
  REQUIRE(client->Put("/tpud/a", "1").ok());
  REQUIRE(log.WaitForEvents(1));

  cluster.Kill(0);
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<int64_t> put = client->Put("/tpud/a", "2");
  CHECK(SecondsSince(start) < 2.0);
  CHECK(put.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(put.status().message()), Catch::StartsWith("etcd " + cluster.endpoint(0) + ": Put: "));
  CHECK(WaitUntil([&] { return !(*watcher)->connected(); }, 2000ms));
  CHECK((*watcher)->running());  // It keeps trying.

  cluster.Restart(0);
  CHECK(WaitUntil([&] { return client->Put("/tpud/b", "3").ok(); }, 5000ms));
  REQUIRE(log.WaitForEvents(2));
  const std::vector<WatchEvent> events = log.events();
  REQUIRE(events.size() == 2);
  CHECK(events[1].kv.key == "/tpud/b");
  CHECK((*watcher)->connected());
}

TEST_CASE("etcd status: members agree on the leader, and health needs a quorum", "[etcd]") {
  tpud::testing::EtcdCluster cluster(3);
  auto client = Connect(cluster.endpoints(), 1500ms);
  const int leader = cluster.Leader();
  uint64_t leader_id = 0;
  for (int i = 0; i < 3; ++i) {
    const absl::StatusOr<MemberStatus> status = client->Status(cluster.endpoint(i));
    REQUIRE(status.ok());
    CHECK(status->endpoint == cluster.endpoint(i));
    CHECK(status->version == "3.4.23");
    CHECK(status->raft_term >= 2);
    CHECK(status->is_leader() == (i == leader));
    if (i == leader) leader_id = status->member_id;
  }
  for (int i = 0; i < 3; ++i) CHECK(client->Status(cluster.endpoint(i))->leader == leader_id);
  CHECK(client->CheckHealth().ok());
  CHECK(client->Status("127.0.0.1:1").status().code() == absl::StatusCode::kInvalidArgument);

  const int survivor = (leader + 1) % 3;
  cluster.Kill(leader);
  cluster.Kill((leader + 2) % 3);
  auto alone = Connect({cluster.endpoint(survivor)}, 1500ms);
  // Give the survivor an election timeout to notice it has no leader.
  CHECK(WaitUntil([&] { return !alone->CheckHealth().ok(); }, 3000ms));
  const auto start = std::chrono::steady_clock::now();
  const absl::Status health = alone->CheckHealth();
  CHECK(SecondsSince(start) < 2.5);
  CHECK(Unreachable(health));
  cluster.Restart(leader);  // Two of three: a quorum again.
  CHECK(WaitUntil([&] { return alone->CheckHealth().ok(); }, 5000ms));
}

}  // namespace
}  // namespace tpud::etcd::testing
