// tpud's etcd client: the one interface through which tpud talks to etcd, for
// multi-host gang coordination (daemon/slice/). Everything etcd-specific lives in
// daemon/etcd/; callers see EtcdClient, LeaseKeepAlive and Watcher, so the
// gang logic can be unit-tested against a fake.
//
// The implementation (grpc_etcd_client.h) calls etcd's v3 gRPC API directly
// (Debian ships no C or C++ etcd client): KV (Range, Put, DeleteRange, Txn,
// Compact), Lease (LeaseGrant, LeaseRevoke, LeaseKeepAlive, LeaseTimeToLive),
// Watch and Maintenance.Status, from the project-owned copy of etcd v3.4.23's
// rpc.proto in proto/etcd/. API reference: https://etcd.io/docs/v3.4/learning/api/
//
// etcd facts this relies on, with sources:
// - Revisions: every write increments one store-wide revision; a Txn is one
//   revision; reads are linearizable by default (rpc.proto RangeRequest
//   .serializable). A Compare on a missing key sees create_revision 0.
// - Fencing: a client can go on believing it leads after its lease expired
//   (IBM/etcd-java#49). Guard every leader write with a Txn comparing the
//   leader key's create_revision with the one the leader created it at.
// - Leases: a key attached to a lease is deleted when the lease expires or is
//   revoked. etcd raises a TTL below ceil(1.5 x election timeout) to that
//   minimum (v3.4 etcdserver/server.go minTTL). A new etcd leader extends
//   every lease by its TTL when it takes over (lease/lessor.go Promote,
//   etcd#10082), so after a leader change a lease can outlive its TTL: peers
//   may see a lost worker's keys vanish up to an election timeout + TTL late.
//   A keepalive for an unknown (expired or revoked) lease returns TTL 0
//   (v3rpc/lease.go); LeaseTimeToLive returns TTL -1.
// - Watch: a watch from revision R delivers every event of its range from R
//   on, in revision order, never splitting one revision's events across
//   responses. An events response's header.revision can run ahead of its
//   events while the watcher catches up (mvcc/watchable_store.go syncWatchers
//   sends Revision: curRev with more to come), so the client resumes from the
//   last event's revision + 1; only a progress notification's header.revision
//   promises that every earlier event was sent (rpc.proto ResponseHeader;
//   etcd sends those only to synced watchers). A watch created without a start
//   revision starts after its created response's header.revision
//   (v3rpc/watch.go). If R was compacted away the watch is canceled with
//   compact_revision set ("etcdserver: mvcc: required revision has been
//   compacted", v3rpc/watch.go, rpctypes/error.go): events are lost and the
//   owner must re-read.
// - Failover: with gRPC metadata "hasleader: true" a member without a raft
//   leader rejects requests with UNAVAILABLE "etcdserver: no leader" before
//   proposing anything, and closes streams when it loses its leader
//   (v3rpc/interceptor.go, rpctypes/md.go), so a stale, partitioned member
//   cannot keep a watch silent. The client sends it on every call.
// - Errors: etcd's own errors are UNAVAILABLE ("no leader", "leader changed",
//   "request timed out[, possibly due to ...]"), OUT_OF_RANGE (compacted),
//   NOT_FOUND (lease not found) (v3.4 etcdserver/api/v3rpc/rpctypes/error.go).
//
// Error contract of every call: absl::Status whose message names the endpoint
// and the operation, e.g. "etcd 127.0.0.1:2379: Txn: deadline exceeded".
// Codes: UNAVAILABLE (no endpoint reachable, or etcd unavailable),
// DEADLINE_EXCEEDED (request_timeout passed), INVALID_ARGUMENT (a bad key,
// lease or option), NOT_FOUND (a lease that does not exist), OUT_OF_RANGE (a
// compacted revision), others as etcd returns them. A write that failed after
// it was sent (DEADLINE_EXCEEDED, or UNAVAILABLE on a broken connection or an
// etcd timeout) may still have been applied; its message says "(outcome
// unknown)", and callers re-read (a fenced Txn's compare tells them).
//
// Thread-safety: see each class.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/etcd/etcd_types.h"

namespace tpud::etcd {

// Keeps one lease alive until stopped or lost, renewing it on its own thread.
// Lost (reported once through the callback given at creation, then alive()
// stays false and renewal stops for good) when:
//  - etcd answers a renewal with TTL <= 0: the lease expired or was revoked
//    (status NOT_FOUND);
//  - no renewal succeeded for a whole TTL counted from the sending of the last
//    successful one, e.g. etcd unreachable (status DEADLINE_EXCEEDED): the
//    lease may have expired, and its owner must act as if it had.
// A lost lease is never revived: grant a new one.
// Thread-safety: all methods may be called from any thread.
class LeaseKeepAlive {
 public:
  // Called once, on the keepalive thread, with why the lease is lost. It must
  // not destroy the LeaseKeepAlive (it may call Stop()).
  using LostCallback = std::function<void(int64_t lease_id, const absl::Status& why)>;

  virtual ~LeaseKeepAlive() = default;  // Stop(), then join the thread.
  virtual int64_t lease_id() const = 0;
  // True until the lease is lost or Stop() is called.
  virtual bool alive() const = 0;
  // Stops renewing (the lease expires a TTL later unless revoked); the lost
  // callback is not called after Stop() returns. Idempotent.
  virtual void Stop() = 0;
};

// Follows a key or a prefix from a revision, on its own thread, delivering
// WatchUpdates in revision order. After a disconnect it re-watches from the
// revision after the last one delivered, on the next endpoint, so no event
// is lost or repeated; it retries until stopped. It stops by itself after a
// kCompacted or kCanceled update (see WatchUpdate in etcd_types.h).
// Thread-safety: all methods may be called from any thread.
class Watcher {
 public:
  // Called on the watcher thread, one update at a time. It must not destroy
  // the Watcher (it may call Stop()).
  using Callback = std::function<void(const WatchUpdate&)>;

  virtual ~Watcher() = default;  // Stop(), then join the thread.
  // The revision the watcher resumes from after a disconnect: one after the
  // newest revision it has delivered or confirmed.
  virtual int64_t next_revision() const = 0;
  // True while a watch stream is established and receiving.
  virtual bool connected() const = 0;
  // False after kCompacted, kCanceled or Stop().
  virtual bool running() const = 0;
  // Stops the watch; the callback is not called after Stop() returns (unless
  // called from the callback itself). Idempotent.
  virtual void Stop() = 0;
};

struct WatchOptions {
  std::string key;               // The key, or the prefix when `prefix`.
  bool prefix = false;           // Watch every key starting with `key`.
  int64_t start_revision = 0;    // First revision to deliver; <= 0 = after the current one.
  bool prev_kv = false;          // Ask etcd for each event's previous key-value.
};

// Thread-safety: implementations are thread-safe; any method may be called
// from any thread at the same time. Every call blocks for at most the
// client's request timeout.
class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  // The key, or an empty kvs when it does not exist.
  virtual absl::StatusOr<RangeResult> Get(const std::string& key) = 0;
  // Every key starting with `prefix` ("" = every key), sorted by key.
  virtual absl::StatusOr<RangeResult> GetPrefix(const std::string& prefix) = 0;
  // Writes `value` at `key`, attached to `lease` (0 = none). The new revision.
  virtual absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                                      int64_t lease = 0) = 0;
  virtual absl::StatusOr<DeleteResult> Delete(const std::string& key) = 0;
  // Runs `txn` atomically. Not retried once sent (see the error contract).
  virtual absl::StatusOr<TxnResult> Commit(const Txn& txn) = 0;
  // Discards the history before `revision` (watches and reads from earlier
  // revisions then fail as compacted). OUT_OF_RANGE when already compacted
  // past it, or when it is in the future.
  virtual absl::Status Compact(int64_t revision) = 0;

  // A new lease of `ttl` (>= 1 s); etcd may raise it to its minimum.
  virtual absl::StatusOr<Lease> GrantLease(std::chrono::seconds ttl) = 0;
  // Revokes the lease, deleting its keys. NOT_FOUND when it does not exist.
  virtual absl::Status RevokeLease(int64_t lease_id) = 0;
  // What remains of the lease; NOT_FOUND when expired, revoked or unknown.
  virtual absl::StatusOr<LeaseTimeToLive> TimeToLive(int64_t lease_id) = 0;
  // Starts renewing `lease` (as granted: its id and ttl) on a new thread; the
  // first renewal is sent at once. `on_lost` as LeaseKeepAlive says.
  virtual absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> KeepAlive(
      const Lease& lease, LeaseKeepAlive::LostCallback on_lost) = 0;

  // Starts a watch on a new thread; returns once etcd has created it (so
  // events after the returned watcher's start are not missed), or fails
  // with the reason within the request timeout.
  virtual absl::StatusOr<std::unique_ptr<Watcher>> Watch(const WatchOptions& options,
                                                         Watcher::Callback callback) = 0;

  // Maintenance.Status of the member at `endpoint` (as given in the options,
  // or host:port), asked of it alone, without failover.
  virtual absl::StatusOr<MemberStatus> Status(const std::string& endpoint) = 0;
  // OK when some endpoint serves a linearizable read (a quorum with a leader
  // is reachable), as `etcdctl endpoint health` checks (a Get of "health").
  virtual absl::Status CheckHealth() = 0;
};

}  // namespace tpud::etcd
