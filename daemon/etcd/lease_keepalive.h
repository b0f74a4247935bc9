// LeaseKeepAlive over etcd's bidirectional Lease.LeaseKeepAlive stream.
//
// The thread keeps one stream open to the current endpoint and sends a
// renewal every TTL/3 (as etcd's clientv3/lease.go does); each answer moves
// the lease's expiry estimate to (when that renewal was sent) + the TTL etcd
// returned, which is never later than etcd's own expiry. A broken stream is
// re-opened on the next endpoint with a backoff (25 ms doubling to 500 ms),
// as long as that estimate lies in the future. The lease is lost, and
// reported once, when etcd answers TTL <= 0 (NOT_FOUND: expired or revoked,
// v3rpc/lease.go) or when the estimate passes (DEADLINE_EXCEEDED). Until the
// first answer, the estimate is construction time + the granted TTL.
//
// Thread-safety: as LeaseKeepAlive (etcd_client.h).
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/status/status.h"
#include "daemon/etcd/endpoints.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/etcd/stop_control.h"

namespace tpud::etcd {

class GrpcLeaseKeepAlive final : public LeaseKeepAlive {
 public:
  // Starts renewing at once.
  GrpcLeaseKeepAlive(std::shared_ptr<EndpointPool> pool, Lease lease, LostCallback on_lost);
  ~GrpcLeaseKeepAlive() override;
  GrpcLeaseKeepAlive(const GrpcLeaseKeepAlive&) = delete;
  GrpcLeaseKeepAlive& operator=(const GrpcLeaseKeepAlive&) = delete;

  int64_t lease_id() const override { return lease_.id; }
  bool alive() const override { return alive_.load() && !control_.stopping(); }
  void Stop() override;

 private:
  void Run();
  // One stream at member `index`, until it breaks (its error), the lease is
  // lost or the session stops (OK for both: Run ends).
  absl::Status RunStream(std::size_t index);
  // Takes etcd's answer to the renewal sent at `sent_at`; false when it says
  // the lease is gone (reported).
  bool Renewed(int64_t ttl_seconds, Deadline sent_at, const std::string& endpoint);
  void ReportLost(const absl::Status& why);

  const std::shared_ptr<EndpointPool> pool_;
  const Lease lease_;
  const LostCallback on_lost_;
  const std::chrono::milliseconds interval_;
  Deadline expires_;  // Keepalive thread only: the lease surely lives until then.
  std::chrono::milliseconds backoff_;  // Keepalive thread only.
  int failures_ = 0;  // Keepalive thread only: streams broken since the last renewal.
  std::atomic<bool> alive_{true};
  StopControl control_;
  absl::Mutex join_mu_;  // Held while joining thread_.
  std::thread thread_;
};

}  // namespace tpud::etcd
