// Conversions between etcd's generated messages (proto/etcd/) and the plain
// values of etcd_types.h.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "daemon/etcd/etcd_types.h"
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcd/mvccpb/kv.pb.h"

namespace tpud::etcd {

KeyValue FromProto(const mvccpb::KeyValue& kv);
WatchEvent FromProto(const mvccpb::Event& event);
MemberStatus FromProto(const etcdserverpb::StatusResponse& response, const std::string& endpoint);
RangeResult FromProto(const etcdserverpb::RangeResponse& response);
// `txn` is the request the response answers (each result's kind comes from it).
TxnResult FromProto(const etcdserverpb::TxnResponse& response, const Txn& txn);

// A Range of `key`, or of every key starting with it when `prefix` ("" = all
// keys: etcd wants key "\0" with range_end "\0" then, clientv3/op.go).
etcdserverpb::RangeRequest RangeOf(const std::string& key, bool prefix);
etcdserverpb::TxnRequest ToProto(const Txn& txn);

// INVALID_ARGUMENT naming the first empty key (etcd refuses them: "key is not
// provided") of a Txn.
absl::Status Validate(const Txn& txn);

}  // namespace tpud::etcd
