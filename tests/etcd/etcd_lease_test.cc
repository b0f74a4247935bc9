// Leases and the keepalive session against a real one-member etcd (election
// timeout 500 ms, so etcd's minimum TTL is 1 s).
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>

#include "tests/etcd/etcd_test_util.h"

namespace tpud::etcd::testing {
namespace {

// What a keepalive's lost callback reported.
struct LossLog {
  LeaseKeepAlive::LostCallback Callback() {
    return [this](int64_t id, const absl::Status& why) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      lease_id = id;
      status = why;
    };
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  std::mutex mu;
  int calls = 0;
  int64_t lease_id = 0;
  absl::Status status;
};

bool KeyExists(GrpcEtcdClient& client, const std::string& key) {
  const absl::StatusOr<RangeResult> got = client.Get(key);
  return got.ok() && !got->kvs.empty();
}

TEST_CASE("etcd lease: keepalive keeps a key past twice its TTL, and after Stop the key expires", "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());
  const absl::StatusOr<Lease> lease = client->GrantLease(2s);
  REQUIRE(lease.ok());
  CHECK(lease->ttl == 2s);
  REQUIRE(client->Put("/tpud/workers/0", "alive", lease->id).ok());
  LossLog loss;
  auto session = client->KeepAlive(*lease, loss.Callback());
  REQUIRE(session.ok());
  CHECK((*session)->lease_id() == lease->id);

  std::this_thread::sleep_for(4500ms);
  CHECK(KeyExists(*client, "/tpud/workers/0"));
  CHECK((*session)->alive());
  const absl::StatusOr<LeaseTimeToLive> ttl = client->TimeToLive(lease->id);
  REQUIRE(ttl.ok());
  CHECK(ttl->granted == 2s);
  CHECK(ttl->remaining >= 1s);

  (*session)->Stop();
  CHECK_FALSE((*session)->alive());
  const auto stopped = std::chrono::steady_clock::now();
  CHECK(WaitUntil([&] { return !KeyExists(*client, "/tpud/workers/0"); }, 5000ms));
  CHECK(SecondsSince(stopped) > 0.5);  // Expired by its TTL, not at Stop.
  CHECK(loss.count() == 0);  // Stopping is not losing.
  CHECK(client->TimeToLive(lease->id).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("etcd lease: revoking a kept-alive lease deletes its key and the callback reports NOT_FOUND",
          "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());
  const absl::StatusOr<Lease> lease = client->GrantLease(3s);
  REQUIRE(lease.ok());
  REQUIRE(client->Put("/tpud/workers/1", "alive", lease->id).ok());
  LossLog loss;
  auto session = client->KeepAlive(*lease, loss.Callback());
  REQUIRE(session.ok());

  REQUIRE(client->RevokeLease(lease->id).ok());
  CHECK_FALSE(KeyExists(*client, "/tpud/workers/1"));
  REQUIRE(WaitUntil([&] { return loss.count() > 0; }, 3000ms));  // Within one renewal interval (TTL/3).
  CHECK_FALSE((*session)->alive());
  std::lock_guard<std::mutex> lock(loss.mu);
  CHECK(loss.calls == 1);
  CHECK(loss.lease_id == lease->id);
  CHECK(loss.status.code() == absl::StatusCode::kNotFound);
  CHECK(client->RevokeLease(lease->id).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("etcd lease: with etcd unreachable the keepalive reports the lease lost within its TTL", "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints(), 1000ms);
  const absl::StatusOr<Lease> lease = client->GrantLease(2s);
  REQUIRE(lease.ok());
  LossLog loss;
  auto session = client->KeepAlive(*lease, loss.Callback());
  REQUIRE(session.ok());
  std::this_thread::sleep_for(1000ms);  // A few renewals.
  REQUIRE(loss.count() == 0);

  cluster.Pause(0);
  const auto paused = std::chrono::steady_clock::now();
  REQUIRE(WaitUntil([&] { return loss.count() > 0; }, 4000ms));
  CHECK(SecondsSince(paused) <= 2.5);  // TTL counted from the last renewal sent before the pause.
  CHECK_FALSE((*session)->alive());
  {
    std::lock_guard<std::mutex> lock(loss.mu);
    CHECK(loss.status.code() == absl::StatusCode::kDeadlineExceeded);
  }
  cluster.Resume(0);
  // A lost lease stays lost: the session does not revive it.
  std::this_thread::sleep_for(500ms);
  CHECK_FALSE((*session)->alive());
  CHECK(loss.count() == 1);
}

TEST_CASE("etcd lease: a lease for an unknown id and a bad TTL are refused", "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());
  CHECK(client->GrantLease(0s).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(client->TimeToLive(12345).status().code() == absl::StatusCode::kNotFound);
  CHECK(client->KeepAlive(Lease{0, 5s}, nullptr).status().code() == absl::StatusCode::kInvalidArgument);
  LossLog loss;
  auto session = client->KeepAlive(Lease{12345, 3s}, loss.Callback());
  REQUIRE(session.ok());
  REQUIRE(WaitUntil([&] { return loss.count() > 0; }, 2000ms));
  std::lock_guard<std::mutex> lock(loss.mu);
  CHECK(loss.status.code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpud::etcd::testing
