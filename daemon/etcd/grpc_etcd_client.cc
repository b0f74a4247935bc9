#include "daemon/etcd/grpc_etcd_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/etcd/convert.h"
#include "daemon/etcd/lease_keepalive.h"
#include "daemon/etcd/unary_call.h"
#include "daemon/etcd/watcher.h"

namespace tpud::etcd {
namespace {

namespace pb = etcdserverpb;
using Member = EndpointPool::Member;

absl::Status EmptyKey(absl::string_view op) {
  return absl::InvalidArgumentError(absl::StrCat("etcd: ", op, ": empty key"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcEtcdClient>> GrpcEtcdClient::Create(const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<EndpointPool>> pool = EndpointPool::Create(options);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<GrpcEtcdClient>(new GrpcEtcdClient(*std::move(pool)));
}

std::vector<std::string> GrpcEtcdClient::endpoints() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < pool_->size(); ++i) out.push_back(pool_->member(i).name);
  return out;
}

absl::StatusOr<RangeResult> GrpcEtcdClient::Range(const std::string& key, bool prefix, absl::string_view op) {
  if (key.empty() && !prefix) return EmptyKey(op);
  const pb::RangeRequest request = RangeOf(key, prefix);
  pb::RangeResponse response;
  absl::Status status = CallWithFailover(*pool_, "Range", Retry::kIdempotent,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.kv->Range(context, request, &response);
                                         });
  if (!status.ok()) return status;
  return FromProto(response);
}

absl::StatusOr<RangeResult> GrpcEtcdClient::Get(const std::string& key) { return Range(key, false, "Get"); }

absl::StatusOr<RangeResult> GrpcEtcdClient::GetPrefix(const std::string& prefix) {
  return Range(prefix, true, "GetPrefix");
}

absl::StatusOr<int64_t> GrpcEtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  if (key.empty()) return EmptyKey("Put");
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  absl::Status status = CallWithFailover(*pool_, "Put", Retry::kOnce,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.kv->Put(context, request, &response);
                                         });
  if (!status.ok()) return status;
  return response.header().revision();
}

absl::StatusOr<DeleteResult> GrpcEtcdClient::Delete(const std::string& key) {
  if (key.empty()) return EmptyKey("Delete");
  pb::DeleteRangeRequest request;
  request.set_key(key);
  pb::DeleteRangeResponse response;
  absl::Status status = CallWithFailover(*pool_, "DeleteRange", Retry::kOnce,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.kv->DeleteRange(context, request, &response);
                                         });
  if (!status.ok()) return status;
  return DeleteResult{response.header().revision(), response.deleted()};
}

absl::StatusOr<TxnResult> GrpcEtcdClient::Commit(const Txn& txn) {
  if (absl::Status valid = Validate(txn); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("etcd: ", valid.message()));
  }
  const pb::TxnRequest request = ToProto(txn);
  pb::TxnResponse response;
  absl::Status status = CallWithFailover(*pool_, "Txn", Retry::kOnce,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.kv->Txn(context, request, &response);
                                         });
  if (!status.ok()) return status;
  return FromProto(response, txn);
}

absl::Status GrpcEtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest request;
  request.set_revision(revision);
  pb::CompactionResponse response;
  return CallWithFailover(*pool_, "Compact", Retry::kOnce, [&](const Member& m, grpc::ClientContext* context) {
    return m.kv->Compact(context, request, &response);
  });
}

absl::StatusOr<Lease> GrpcEtcdClient::GrantLease(std::chrono::seconds ttl) {
  if (ttl.count() < 1) return absl::InvalidArgumentError("etcd: LeaseGrant: ttl must be >= 1 s");
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl.count());
  pb::LeaseGrantResponse response;
  absl::Status status = CallWithFailover(*pool_, "LeaseGrant", Retry::kIdempotent,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.lease->LeaseGrant(context, request, &response);
                                         });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd: LeaseGrant: ", response.error()));
  }
  return Lease{response.id(), std::chrono::seconds(response.ttl())};
}

absl::Status GrpcEtcdClient::RevokeLease(int64_t lease_id) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  pb::LeaseRevokeResponse response;
  return CallWithFailover(*pool_, "LeaseRevoke", Retry::kOnce, [&](const Member& m, grpc::ClientContext* context) {
    return m.lease->LeaseRevoke(context, request, &response);
  });
}

absl::StatusOr<LeaseTimeToLive> GrpcEtcdClient::TimeToLive(int64_t lease_id) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease_id);
  pb::LeaseTimeToLiveResponse response;
  absl::Status status = CallWithFailover(*pool_, "LeaseTimeToLive", Retry::kIdempotent,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.lease->LeaseTimeToLive(context, request, &response);
                                         });
  if (!status.ok()) return status;
  if (response.ttl() < 0) {  // etcd's answer for an unknown lease (v3rpc/lease.go).
    return absl::NotFoundError(absl::StrCat("etcd: LeaseTimeToLive: lease ", lease_id, " not found"));
  }
  return LeaseTimeToLive{response.id(), std::chrono::seconds(response.ttl()),
                         std::chrono::seconds(response.grantedttl())};
}

absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> GrpcEtcdClient::KeepAlive(const Lease& lease,
                                                                          LeaseKeepAlive::LostCallback on_lost) {
  if (lease.id == 0 || lease.ttl.count() < 1) {
    return absl::InvalidArgumentError("etcd: LeaseKeepAlive: needs a granted lease (id != 0, ttl >= 1 s)");
  }
  return std::unique_ptr<LeaseKeepAlive>(new GrpcLeaseKeepAlive(pool_, lease, std::move(on_lost)));
}

absl::StatusOr<std::unique_ptr<Watcher>> GrpcEtcdClient::Watch(const WatchOptions& options,
                                                               Watcher::Callback callback) {
  if (options.key.empty() && !options.prefix) return EmptyKey("Watch");
  auto watcher = std::make_unique<GrpcWatcher>(pool_, options, std::move(callback));
  if (absl::Status started = watcher->Start(); !started.ok()) return started;
  return std::unique_ptr<Watcher>(std::move(watcher));
}

absl::StatusOr<MemberStatus> GrpcEtcdClient::Status(const std::string& endpoint) {
  const std::optional<std::size_t> index = pool_->Find(endpoint);
  if (!index) return absl::InvalidArgumentError(absl::StrCat("etcd: Status: ", endpoint, " is not an endpoint"));
  pb::StatusResponse response;
  absl::Status status = CallMember(*pool_, *index, "Status", [&](const Member& m, grpc::ClientContext* context) {
    return m.maintenance->Status(context, pb::StatusRequest(), &response);
  });
  if (!status.ok()) return status;
  return FromProto(response, pool_->member(*index).name);
}

absl::Status GrpcEtcdClient::CheckHealth() {
  // As `etcdctl endpoint health` (etcdctl/ctlv3/command/ep_command.go): a
  // linearizable Get needs a leader and a quorum; its value does not matter,
  // and PERMISSION_DENIED also proves the request went through consensus.
  pb::RangeRequest request = RangeOf("health", false);
  request.set_count_only(true);
  pb::RangeResponse response;
  absl::Status status = CallWithFailover(*pool_, "Range(health)", Retry::kIdempotent,
                                         [&](const Member& m, grpc::ClientContext* context) {
                                           return m.kv->Range(context, request, &response);
                                         });
  return absl::IsPermissionDenied(status) ? absl::OkStatus() : status;
}

}  // namespace tpud::etcd
