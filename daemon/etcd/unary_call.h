// Unary etcd calls with a deadline, failover and the retry rule.
//
// A call gets one deadline, now + request_timeout, covering every attempt.
// Each attempt goes to the pool's current endpoint with the "hasleader"
// metadata (stream_call.h). After a failure that the next member may not
// share, the pool fails over and the call tries again, backing off 25 ms
// doubling to 400 ms after each full round of the endpoints, until the
// deadline.
//
// The retry rule keeps writes from being applied twice:
//  - any call is retried when it was never sent (its endpoint not connected;
//    gRPC's "failed to connect to all addresses") or was refused before etcd
//    proposed it ("etcdserver: no leader", "etcdserver: too many requests",
//    etcd v3.4 rpctypes/error.go);
//  - a kIdempotent call (reads, Status, LeaseGrant whose duplicate just
//    expires unused) is also retried after any other UNAVAILABLE, and each of
//    its attempts gets a third of request_timeout, so a member that hangs
//    (paused, or a follower whose leader just died: etcd answers its reads
//    "leader changed" only after the election) is left for another;
//  - a kOnce call (Put, DeleteRange, Txn, LeaseRevoke, Compact) that failed
//    after it was sent is not retried: its status says "(outcome unknown)".
//
// Thread-safety: thread-safe (each call uses its own ClientContext).
#pragma once

#include <cstddef>
#include <functional>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/etcd/endpoints.h"

namespace tpud::etcd {

enum class Retry { kIdempotent, kOnce };

// One attempt: fills the response the caller captured, returns gRPC's status.
using Attempt = std::function<grpc::Status(const EndpointPool::Member&, grpc::ClientContext*)>;

// Runs `attempt` as above. OK, or the last attempt's error as ToStatus makes
// it, with " (after N attempts)" when there were several.
absl::Status CallWithFailover(EndpointPool& pool, absl::string_view op, Retry retry, const Attempt& attempt);

// One attempt at one member, no failover (Maintenance.Status of a member).
absl::Status CallMember(EndpointPool& pool, std::size_t index, absl::string_view op, const Attempt& attempt);

// "etcd <endpoint>: <op>: <message>" with gRPC's code, and " (outcome
// unknown)" when `outcome_unknown`.
absl::Status ToStatus(const grpc::Status& status, absl::string_view endpoint, absl::string_view op,
                      bool outcome_unknown = false);

// A failure that says etcd never applied the request, so any call may be
// retried elsewhere (see the retry rule above).
bool NotApplied(const grpc::Status& status);

}  // namespace tpud::etcd
