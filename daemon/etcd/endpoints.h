// The etcd endpoints one client talks to: their parsing, one gRPC channel per
// endpoint (with TLS when configured), and which endpoint is current.
//
// Failover design: one channel per endpoint, not one channel with a
// multi-address target, so every error can name the member it came from and a
// call can tell "never sent" (the endpoint is not connected) from "sent, then
// failed". Calls go to the current endpoint; a caller that finds it unusable
// (cannot connect, no leader, stream broken) calls FailedOver(), which moves
// the current endpoint on, round robin. Channels reconnect in the background
// with a backoff capped at 1 s, so a restarted member is usable again within
// about a second. HTTP/2 keepalive pings (keepalive_time, only while a call
// is open, as etcd's server policy wants: --grpc-keepalive-min-time 5 s,
// PermitWithoutStream false, v3.4 embed/etcd.go) find a dead peer under an
// idle watch.
//
// Thread-safety: EndpointPool is thread-safe; members are immutable after
// Create and their stubs are thread-safe (gRPC).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"

namespace tpud::etcd {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// PEM files for TLS to etcd (etcd's --trusted-ca-file, --cert-file, --key-file).
struct TlsFiles {
  std::string ca_file;    // CA bundle that signed the servers; "" = the system roots.
  std::string cert_file;  // Client certificate; with key_file, or neither.
  std::string key_file;   // Client private key.
};

struct ClientOptions {
  // host:port, http://host:port or https://host:port; IPv6 as [addr]:port.
  // At least one. http:// is plaintext and cannot be mixed with `tls`.
  std::vector<std::string> endpoints;
  // When set, every endpoint but http:// ones uses TLS with these files;
  // https:// endpoints use TLS (system roots) even without it.
  std::optional<TlsFiles> tls;
  std::chrono::milliseconds dial_timeout{2000};     // Connecting to one endpoint.
  std::chrono::milliseconds request_timeout{5000};  // One call, all its retries included.
  std::chrono::milliseconds keepalive_time{10000};  // HTTP/2 ping interval; >= 5 s for etcd.
  std::chrono::milliseconds keepalive_timeout{5000};  // No ping answer in this = connection dead.
};

// One parsed endpoint.
struct Endpoint {
  std::string authority;  // host:port, as used in messages and as the gRPC target.
  bool tls = false;
};

// Parses one endpoint as ClientOptions describes. INVALID_ARGUMENT naming the
// endpoint and what is wrong (scheme, missing or bad port, empty host, path).
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text, bool tls_configured);

// The gRPC deadline for `deadline` (steady clock); Deadline::max() = none.
gpr_timespec GrpcDeadline(Deadline deadline);

class EndpointPool {
 public:
  struct Member {
    std::string name;  // host:port
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  };

  // Parses the endpoints, reads the TLS files and creates the channels
  // (which connect lazily). INVALID_ARGUMENT for a bad endpoint or option,
  // NOT_FOUND / PERMISSION_DENIED naming a TLS file that cannot be read.
  static absl::StatusOr<std::shared_ptr<EndpointPool>> Create(const ClientOptions& options);

  const ClientOptions& options() const { return options_; }
  std::size_t size() const { return members_.size(); }
  const Member& member(std::size_t index) const { return *members_[index]; }
  // The index of the endpoint calls should use now.
  std::size_t current() const { return current_.load(); }
  // `index` failed: make the next endpoint current, unless another caller
  // already moved on from `index`.
  void FailedOver(std::size_t index);
  // The index of `endpoint` (as given in the options, or host:port).
  std::optional<std::size_t> Find(absl::string_view endpoint) const;
  // Waits until the member's channel is connected (true), it is known to be
  // failing (false at once: a call would not be sent), or `deadline` passes
  // (false).
  bool WaitConnected(std::size_t index, Deadline deadline) const;

 private:
  explicit EndpointPool(ClientOptions options) : options_(std::move(options)) {}

  ClientOptions options_;
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<std::size_t> current_{0};
};

}  // namespace tpud::etcd
