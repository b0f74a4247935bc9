#include "daemon/etcd/endpoints.h"

#include <fstream>
#include <sstream>
#include <utility>

#include <grpc/support/time.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tpud::etcd {
namespace {

absl::Status BadEndpoint(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("etcd endpoint \"", text, "\": ", why));
}

// host:port with a bracketed IPv6 host allowed; OK when both parts are sane.
absl::Status CheckAuthority(absl::string_view text, absl::string_view authority) {
  if (authority.find('/') != absl::string_view::npos) return BadEndpoint(text, "has a path; want host:port");
  const std::size_t colon = authority.rfind(':');
  if (colon == absl::string_view::npos) return BadEndpoint(text, "has no port; want host:port");
  absl::string_view host = authority.substr(0, colon);
  if (absl::StartsWith(host, "[") != absl::EndsWith(host, "]")) return BadEndpoint(text, "unbalanced [ ]");
  if (host.empty() || host == "[]") return BadEndpoint(text, "has no host");
  if (host.find(':') != absl::string_view::npos && !absl::StartsWith(host, "[")) {
    return BadEndpoint(text, "IPv6 hosts need brackets, [addr]:port");
  }
  int port = 0;
  if (!absl::SimpleAtoi(authority.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return BadEndpoint(text, "port must be 1..65535");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("etcd tls ", what, " ", path, ": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return absl::InvalidArgumentError(absl::StrCat("etcd tls ", what, " ", path, ": empty"));
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(const std::optional<TlsFiles>& tls) {
  grpc::SslCredentialsOptions ssl;
  if (!tls) return grpc::SslCredentials(ssl);
  if (tls->cert_file.empty() != tls->key_file.empty()) {
    return absl::InvalidArgumentError("etcd tls: cert and key go together: give both or neither");
  }
  if (!tls->ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls->ca_file, "ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!tls->cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls->cert_file, "cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls->key_file, "key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments ChannelArgs(const ClientOptions& options) {
  grpc::ChannelArguments args;
  // Reconnect fast after a member restarts (gRPC's default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC reads it as the minimum
  // connect timeout (src/core/ext/filters/client_channel/subchannel.cc, 1.51),
  // and short values abandon handshakes with a loaded member.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options.keepalive_time.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(options.keepalive_timeout.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // Each pool gets its own connections: two clients in one process (tests,
  // or a failover probe) must not share one subchannel and its failures.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);  // etcd's own limit applies (--max-request-bytes + overhead).
  return args;
}

absl::Status CheckOptions(const ClientOptions& options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints");
  if (options.dial_timeout.count() <= 0 || options.request_timeout.count() <= 0) {
    return absl::InvalidArgumentError("etcd: dial_timeout and request_timeout must be > 0");
  }
  if (options.keepalive_time < std::chrono::seconds(5)) {
    return absl::InvalidArgumentError("etcd: keepalive_time must be >= 5 s (etcd's --grpc-keepalive-min-time)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text, bool tls_configured) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  Endpoint endpoint;
  endpoint.tls = tls_configured;
  if (absl::ConsumePrefix(&rest, "https://")) {
    endpoint.tls = true;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    if (tls_configured) return BadEndpoint(text, "is http:// (plaintext) but tls is configured");
    endpoint.tls = false;
  } else if (rest.find("://") != absl::string_view::npos) {
    return BadEndpoint(text, "scheme must be http:// or https://");
  }
  absl::ConsumeSuffix(&rest, "/");
  if (absl::Status s = CheckAuthority(text, rest); !s.ok()) return s;
  endpoint.authority = std::string(rest);
  return endpoint;
}

gpr_timespec GrpcDeadline(Deadline deadline) {
  if (deadline == Deadline::max()) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  const int64_t micros = left.count() > 0 ? left.count() : 0;
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_micros(micros, GPR_TIMESPAN));
}

absl::StatusOr<std::shared_ptr<EndpointPool>> EndpointPool::Create(const ClientOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::shared_ptr<EndpointPool> pool(new EndpointPool(options));
  const grpc::ChannelArguments args = ChannelArgs(options);
  for (const std::string& text : options.endpoints) {
    absl::StatusOr<Endpoint> endpoint = ParseEndpoint(text, options.tls.has_value());
    if (!endpoint.ok()) return endpoint.status();
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (endpoint->tls) {
      absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls = TlsCredentials(options.tls);
      if (!tls.ok()) return tls.status();
      credentials = *std::move(tls);
    }
    auto member = std::make_unique<Member>();
    member->name = endpoint->authority;
    member->channel = grpc::CreateCustomChannel(endpoint->authority, credentials, args);
    member->kv = etcdserverpb::KV::NewStub(member->channel);
    member->lease = etcdserverpb::Lease::NewStub(member->channel);
    member->watch = etcdserverpb::Watch::NewStub(member->channel);
    member->maintenance = etcdserverpb::Maintenance::NewStub(member->channel);
    pool->members_.push_back(std::move(member));
  }
  return pool;
}

void EndpointPool::FailedOver(std::size_t index) {
  std::size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % members_.size());
}

std::optional<std::size_t> EndpointPool::Find(absl::string_view endpoint) const {
  absl::StatusOr<Endpoint> parsed = ParseEndpoint(endpoint, options_.tls.has_value());
  const absl::string_view name = parsed.ok() ? absl::string_view(parsed->authority) : endpoint;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i]->name == name) return i;
  }
  return std::nullopt;
}

bool EndpointPool::WaitConnected(std::size_t index, Deadline deadline) const {
  grpc::Channel& channel = *members_[index]->channel;
  for (;;) {
    const grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return true;
    if (state == GRPC_CHANNEL_SHUTDOWN) return false;
    // TRANSIENT_FAILURE included: gRPC keeps reconnecting in the background,
    // but a connection's progress (its SETTINGS frame) is only read while some
    // thread polls; waiting here polls, so a member that came back is reached
    // within this dial instead of at gRPC's 5 s backup poll.
    if (Clock::now() >= deadline || !channel.WaitForStateChange(state, GrpcDeadline(deadline))) return false;
  }
}

}  // namespace tpud::etcd
