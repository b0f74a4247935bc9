// The etcd client's pure parts, no etcd needed: endpoint parsing, prefix
// ranges, option errors, the retry rule and error messages.
#include <catch2/catch.hpp>

#include "daemon/etcd/endpoints.h"
#include "daemon/etcd/etcd_types.h"
#include "daemon/etcd/grpc_etcd_client.h"
#include "daemon/etcd/unary_call.h"
#include "tests/support/temp_dir.h"

namespace tpud::etcd {
namespace {

TEST_CASE("etcd endpoints: host:port, http:// and https:// parse, TLS as the scheme or the config says",
          "[etcd]") {
  struct Case {
    std::string text;
    bool tls_configured;
    std::string authority;
    bool tls;
  };
  const std::vector<Case> cases = {
      {"10.0.0.5:2379", false, "10.0.0.5:2379", false},
      {"10.0.0.5:2379", true, "10.0.0.5:2379", true},
      {"http://127.0.0.1:2379", false, "127.0.0.1:2379", false},
      {"https://etcd-0.example:2379", false, "etcd-0.example:2379", true},
      {"https://etcd-0.example:2379/", true, "etcd-0.example:2379", true},
      {"  [::1]:2379 ", false, "[::1]:2379", false},
  };
  for (const Case& c : cases) {
    INFO(c.text << " tls_configured=" << c.tls_configured);
    absl::StatusOr<Endpoint> endpoint = ParseEndpoint(c.text, c.tls_configured);
    REQUIRE(endpoint.ok());
    CHECK(endpoint->authority == c.authority);
    CHECK(endpoint->tls == c.tls);
  }
}

TEST_CASE("etcd endpoints: a bad endpoint is INVALID_ARGUMENT naming it and what is wrong", "[etcd]") {
  struct Case {
    std::string text;
    bool tls_configured;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"127.0.0.1", false, "has no port"},
      {"127.0.0.1:0", false, "port must be 1..65535"},
      {"127.0.0.1:65536", false, "port must be 1..65535"},
      {"127.0.0.1:x", false, "port must be 1..65535"},
      {":2379", false, "has no host"},
      {"unix://run/etcd.sock", false, "scheme must be"},
      {"http://127.0.0.1:2379/v3", false, "has a path"},
      {"http://127.0.0.1:2379", true, "(plaintext) but tls is configured"},
      {"::1:2379", false, "IPv6 hosts need brackets"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    absl::StatusOr<Endpoint> endpoint = ParseEndpoint(c.text, c.tls_configured);
    REQUIRE_FALSE(endpoint.ok());
    CHECK(endpoint.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(endpoint.status().message());
    CHECK_THAT(message, Catch::Contains("\"" + c.text + "\"") && Catch::Contains(c.why));
  }
}

TEST_CASE("etcd prefix: the range end is the prefix with its last byte below 0xff plus one", "[etcd]") {
  CHECK(PrefixRangeEnd("/tpud/") == "/tpud0");
  CHECK(PrefixRangeEnd("a") == "b");
  CHECK(PrefixRangeEnd(std::string("a\xff", 2)) == "b");
  CHECK(PrefixRangeEnd(std::string("\xff\xff", 2)) == std::string(1, '\0'));
  CHECK(PrefixRangeEnd("") == std::string(1, '\0'));
}

TEST_CASE("etcd client: bad options fail creation with a message naming the option or file", "[etcd]") {
  tpud::testing::TempDir dir("tpud-etcd-tls");
  ClientOptions options;
  CHECK_THAT(std::string(GrpcEtcdClient::Create(options).status().message()), Catch::Contains("no endpoints"));

  options.endpoints = {"127.0.0.1:2379"};
  options.keepalive_time = std::chrono::seconds(1);
  CHECK_THAT(std::string(GrpcEtcdClient::Create(options).status().message()), Catch::Contains("keepalive_time"));

  options.keepalive_time = std::chrono::seconds(10);
  options.tls = TlsFiles{(dir.path() / "missing-ca.pem").string(), "", ""};
  absl::Status missing = GrpcEtcdClient::Create(options).status();
  CHECK(missing.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.message()), Catch::Contains("missing-ca.pem"));

  options.tls = TlsFiles{"", dir.File("cert.pem", "x"), ""};
  CHECK_THAT(std::string(GrpcEtcdClient::Create(options).status().message()),
             Catch::Contains("cert and key go together"));

  options.tls = TlsFiles{dir.File("ca.pem", "x"), dir.File("cert.pem", "x"), dir.File("key.pem", "x")};
  CHECK(GrpcEtcdClient::Create(options).ok());  // Connects lazily: content errors show on first call.
}

TEST_CASE("etcd retry rule: only refusals before proposing and unsent calls count as not applied", "[etcd]") {
  using grpc::StatusCode;
  CHECK(NotApplied(grpc::Status(StatusCode::UNAVAILABLE, "etcdserver: no leader")));
  CHECK(NotApplied(grpc::Status(StatusCode::RESOURCE_EXHAUSTED, "etcdserver: too many requests")));
  CHECK(NotApplied(grpc::Status(StatusCode::UNAVAILABLE, "failed to connect to all addresses; last error: x")));
  CHECK_FALSE(NotApplied(grpc::Status(StatusCode::UNAVAILABLE, "etcdserver: request timed out")));
  CHECK_FALSE(NotApplied(grpc::Status(StatusCode::UNAVAILABLE, "Socket closed")));
  CHECK_FALSE(NotApplied(grpc::Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded")));
}

TEST_CASE("etcd errors: messages name the endpoint and the operation, and an unknown outcome", "[etcd]") {
  const absl::Status status =
      ToStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), "127.0.0.1:2379", "Txn", true);
  CHECK(status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(status.message() == "etcd 127.0.0.1:2379: Txn: deadline exceeded (outcome unknown)");
}

TEST_CASE("etcd Txn builder: If, Then and Else collect compares and operations in order", "[etcd]") {
  Txn txn;
  txn.If(Compare::CreateRevision("/l", Compare::kEqual, 0))
      .If(Compare::Value("/v", Compare::kNotEqual, "x"))
      .Then(TxnOp::Put("/l", "me", 7))
      .Then(TxnOp::DeletePrefix("/tmp/"))
      .Else(TxnOp::Get("/l"));
  REQUIRE(txn.compares.size() == 2);
  CHECK(txn.compares[0].target == Compare::kCreateRevision);
  CHECK(txn.compares[1].value == "x");
  REQUIRE(txn.success.size() == 2);
  CHECK(txn.success[0].lease == 7);
  CHECK(txn.success[1].kind == TxnOp::kDeletePrefix);
  REQUIRE(txn.failure.size() == 1);
  CHECK(txn.failure[0].kind == TxnOp::kGet);
}

}  // namespace
}  // namespace tpud::etcd
