// KV and Txn against a real one-member etcd.
#include <catch2/catch.hpp>

#include <barrier>
#include <thread>

#include "tests/etcd/etcd_test_util.h"

namespace tpud::etcd::testing {
namespace {

TEST_CASE("etcd KV: put, get and get-prefix return values with their revisions", "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());

  const absl::StatusOr<int64_t> first = client->Put("/tpud/w/0", "a");
  REQUIRE(first.ok());
  const absl::StatusOr<int64_t> second = client->Put("/tpud/w/1", "b");
  REQUIRE(second.ok());
  CHECK(*second == *first + 1);
  REQUIRE(client->Put("/tpud/w/0", "c").ok());
  REQUIRE(client->Put("/tpud/x", "outside").ok());

  const absl::StatusOr<RangeResult> one = client->Get("/tpud/w/0");
  REQUIRE(one.ok());
  REQUIRE(one->kvs.size() == 1);
  CHECK(one->kvs[0].value == "c");
  CHECK(one->kvs[0].create_revision == *first);
  CHECK(one->kvs[0].mod_revision == *second + 1);
  CHECK(one->kvs[0].version == 2);
  CHECK(one->revision == *second + 2);

  const absl::StatusOr<RangeResult> missing = client->Get("/tpud/none");
  REQUIRE(missing.ok());
  CHECK(missing->kvs.empty());

  const absl::StatusOr<RangeResult> prefix = client->GetPrefix("/tpud/w/");
  REQUIRE(prefix.ok());
  REQUIRE(prefix->kvs.size() == 2);
  CHECK(prefix->kvs[0].key == "/tpud/w/0");
  CHECK(prefix->kvs[1].key == "/tpud/w/1");
  CHECK(prefix->kvs[1].value == "b");

  const absl::StatusOr<RangeResult> all = client->GetPrefix("");
  REQUIRE(all.ok());
  CHECK(all->kvs.size() == 3);
}

TEST_CASE("etcd KV: delete removes one key and says how many, an empty key is INVALID_ARGUMENT", "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());
  REQUIRE(client->Put("/k", "v").ok());
  const absl::StatusOr<DeleteResult> deleted = client->Delete("/k");
  REQUIRE(deleted.ok());
  CHECK(deleted->deleted == 1);
  const absl::StatusOr<DeleteResult> again = client->Delete("/k");
  REQUIRE(again.ok());
  CHECK(again->deleted == 0);
  CHECK(client->Get("/k")->kvs.empty());
  CHECK(client->Put("", "v").status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("etcd Txn: of two racing compare-and-swaps on one mod_revision exactly one wins, every round",
          "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto a = Connect(cluster.endpoints());
  auto b = Connect(cluster.endpoints());
  REQUIRE(a->Put("/tpud/step", "0").ok());
  for (int round = 1; round <= 20; ++round) {
    const int64_t seen = a->Get("/tpud/step")->kvs.at(0).mod_revision;
    std::barrier start(2);
    // Catch2 assertions are for the test's thread only: the proposers just record.
    auto propose = [&](GrpcEtcdClient& client, const std::string& name) {
      const Txn txn = Txn()
                          .If(Compare::ModRevision("/tpud/step", Compare::kEqual, seen))
                          .Then(TxnOp::Put("/tpud/step", name))
                          .Else(TxnOp::Get("/tpud/step"));
      start.arrive_and_wait();
      return client.Commit(txn);
    };
    absl::StatusOr<TxnResult> from_b;
    std::thread other([&] { from_b = propose(*b, "b"); });
    const absl::StatusOr<TxnResult> from_a = propose(*a, "a");
    other.join();
    INFO("round " << round);
    REQUIRE(from_a.ok());
    REQUIRE(from_b.ok());
    REQUIRE(from_a->succeeded != from_b->succeeded);
    const TxnResult& loser = from_a->succeeded ? *from_b : *from_a;
    REQUIRE(loser.results.size() == 1);
    CHECK(loser.results[0].kvs.at(0).mod_revision > seen);  // The loser reads the winner's write.
    CHECK(a->Get("/tpud/step")->kvs.at(0).value == (from_a->succeeded ? "a" : "b"));
  }
}

TEST_CASE("etcd Txn: create-if-absent elects one holder, and the failure branch reads it", "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());
  auto elect = [&](const std::string& me) {
    return client->Commit(Txn()
                              .If(Compare::CreateRevision("/tpud/leader", Compare::kEqual, 0))
                              .Then(TxnOp::Put("/tpud/leader", me))
                              .Else(TxnOp::Get("/tpud/leader")));
  };
  const absl::StatusOr<TxnResult> first = elect("worker-0");
  REQUIRE(first.ok());
  CHECK(first->succeeded);
  const absl::StatusOr<TxnResult> second = elect("worker-1");
  REQUIRE(second.ok());
  CHECK_FALSE(second->succeeded);
  REQUIRE(second->results.size() == 1);
  CHECK(second->results[0].kind == TxnOp::kGet);
  CHECK(second->results[0].kvs.at(0).value == "worker-0");
  CHECK(second->results[0].kvs.at(0).create_revision == first->revision);
}

TEST_CASE("etcd Txn: a write fenced on the leader key's create_revision fails once the key was re-created",
          "[etcd]") {
  tpud::testing::EtcdCluster cluster(1);
  auto client = Connect(cluster.endpoints());
  const int64_t created = *client->Put("/tpud/leader", "worker-0");
  auto fenced_write = [&](const std::string& step) {
    return client->Commit(Txn()
                              .If(Compare::CreateRevision("/tpud/leader", Compare::kEqual, created))
                              .Then(TxnOp::Put("/tpud/gang/step", step)));
  };
  REQUIRE(fenced_write("100")->succeeded);
  // The old leader's key is gone (lease expired) and another worker leads now.
  REQUIRE(client->Delete("/tpud/leader").ok());
  REQUIRE(client->Put("/tpud/leader", "worker-1").ok());
  const absl::StatusOr<TxnResult> stale = fenced_write("200");
  REQUIRE(stale.ok());
  CHECK_FALSE(stale->succeeded);
  CHECK(client->Get("/tpud/gang/step")->kvs.at(0).value == "100");
  // Multi-key success branch and delete results.
  REQUIRE(client->Put("/tpud/tmp/a", "1").ok());
  REQUIRE(client->Put("/tpud/tmp/b", "2").ok());
  const absl::StatusOr<TxnResult> cleanup =
      client->Commit(Txn().If(Compare::Value("/tpud/leader", Compare::kEqual, "worker-1"))
                         .Then(TxnOp::DeletePrefix("/tpud/tmp/"))
                         .Then(TxnOp::GetPrefix("/tpud/")));
  REQUIRE(cleanup.ok());
  REQUIRE(cleanup->succeeded);
  REQUIRE(cleanup->results.size() == 2);
  CHECK(cleanup->results[0].deleted == 2);
  CHECK(cleanup->results[1].kvs.size() == 2);  // /tpud/gang/step and /tpud/leader.
}

}  // namespace
}  // namespace tpud::etcd::testing
