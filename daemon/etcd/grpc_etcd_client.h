// EtcdClient over etcd's v3 gRPC API (etcd_client.h says what it relies on).
//
// Unary calls follow unary_call.h (one deadline per call, failover, the retry
// rule); LeaseKeepAlive and Watch run on their own threads (lease_keepalive.h,
// watcher.h) and share this client's endpoints, so they may outlive it.
//
// Thread-safety: thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/etcd/endpoints.h"
#include "daemon/etcd/etcd_client.h"

namespace tpud::etcd {

class GrpcEtcdClient final : public EtcdClient {
 public:
  // Checks the options and creates the channels; connects lazily, so an
  // unreachable etcd is not an error here. INVALID_ARGUMENT (bad endpoint or
  // option) or NOT_FOUND (unreadable TLS file), naming what is wrong.
  static absl::StatusOr<std::unique_ptr<GrpcEtcdClient>> Create(const ClientOptions& options);

  absl::StatusOr<RangeResult> Get(const std::string& key) override;
  absl::StatusOr<RangeResult> GetPrefix(const std::string& prefix) override;
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0) override;
  absl::StatusOr<DeleteResult> Delete(const std::string& key) override;
  absl::StatusOr<TxnResult> Commit(const Txn& txn) override;
  absl::Status Compact(int64_t revision) override;

  absl::StatusOr<Lease> GrantLease(std::chrono::seconds ttl) override;
  absl::Status RevokeLease(int64_t lease_id) override;
  absl::StatusOr<LeaseTimeToLive> TimeToLive(int64_t lease_id) override;
  absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> KeepAlive(const Lease& lease,
                                                            LeaseKeepAlive::LostCallback on_lost) override;

  absl::StatusOr<std::unique_ptr<Watcher>> Watch(const WatchOptions& options,
                                                 Watcher::Callback callback) override;

  absl::StatusOr<MemberStatus> Status(const std::string& endpoint) override;
  absl::Status CheckHealth() override;

  // The endpoints as host:port, in the order given.
  std::vector<std::string> endpoints() const;

 private:
  explicit GrpcEtcdClient(std::shared_ptr<EndpointPool> pool) : pool_(std::move(pool)) {}
  absl::StatusOr<RangeResult> Range(const std::string& key, bool prefix, absl::string_view op);

  std::shared_ptr<EndpointPool> pool_;
};

}  // namespace tpud::etcd
