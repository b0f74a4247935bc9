#include "daemon/etcd/convert.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud::etcd {
namespace {

namespace pb = etcdserverpb;

// Sets key and range_end of a Range or DeleteRange request.
template <class Request>
void SetKeys(const std::string& key, bool prefix, Request* request) {
  if (!prefix) {
    request->set_key(key);
  } else if (key.empty()) {
    request->set_key(std::string(1, '\0'));
    request->set_range_end(std::string(1, '\0'));
  } else {
    request->set_key(key);
    request->set_range_end(PrefixRangeEnd(key));
  }
}

pb::Compare ToProto(const Compare& compare) {
  pb::Compare out;
  out.set_key(compare.key);
  switch (compare.result) {
    case Compare::kEqual: out.set_result(pb::Compare::EQUAL); break;
    case Compare::kNotEqual: out.set_result(pb::Compare::NOT_EQUAL); break;
    case Compare::kGreater: out.set_result(pb::Compare::GREATER); break;
    case Compare::kLess: out.set_result(pb::Compare::LESS); break;
  }
  switch (compare.target) {
    case Compare::kValue:
      out.set_target(pb::Compare::VALUE);
      out.set_value(compare.value);
      break;
    case Compare::kCreateRevision:
      out.set_target(pb::Compare::CREATE);
      out.set_create_revision(compare.number);
      break;
    case Compare::kModRevision:
      out.set_target(pb::Compare::MOD);
      out.set_mod_revision(compare.number);
      break;
    case Compare::kVersion:
      out.set_target(pb::Compare::VERSION);
      out.set_version(compare.number);
      break;
  }
  return out;
}

pb::RequestOp ToProto(const TxnOp& op) {
  pb::RequestOp out;
  switch (op.kind) {
    case TxnOp::kGet:
    case TxnOp::kGetPrefix:
      *out.mutable_request_range() = RangeOf(op.key, op.kind == TxnOp::kGetPrefix);
      break;
    case TxnOp::kPut: {
      pb::PutRequest* put = out.mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case TxnOp::kDelete:
    case TxnOp::kDeletePrefix:
      SetKeys(op.key, op.kind == TxnOp::kDeletePrefix, out.mutable_request_delete_range());
      break;
  }
  return out;
}

TxnOpResult OpResultFromProto(const pb::ResponseOp& response, TxnOp::Kind kind) {
  TxnOpResult out;
  out.kind = kind;
  if (response.has_response_range()) {
    for (const mvccpb::KeyValue& kv : response.response_range().kvs()) out.kvs.push_back(FromProto(kv));
  }
  if (response.has_response_delete_range()) out.deleted = response.response_delete_range().deleted();
  return out;
}

}  // namespace

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()};
}

WatchEvent FromProto(const mvccpb::Event& event) {
  WatchEvent out;
  out.type = event.type() == mvccpb::Event::DELETE ? WatchEvent::kDelete : WatchEvent::kPut;
  out.kv = FromProto(event.kv());
  if (event.has_prev_kv()) out.prev_kv = FromProto(event.prev_kv());
  return out;
}

MemberStatus FromProto(const pb::StatusResponse& response, const std::string& endpoint) {
  MemberStatus out;
  out.endpoint = endpoint;
  out.member_id = response.header().member_id();
  out.leader = response.leader();
  out.raft_term = response.raftterm();
  out.raft_index = response.raftindex();
  out.revision = response.header().revision();
  out.version = response.version();
  out.errors.assign(response.errors().begin(), response.errors().end());
  return out;
}

RangeResult FromProto(const pb::RangeResponse& response) {
  RangeResult out;
  out.revision = response.header().revision();
  for (const mvccpb::KeyValue& kv : response.kvs()) out.kvs.push_back(FromProto(kv));
  return out;
}

TxnResult FromProto(const pb::TxnResponse& response, const Txn& txn) {
  TxnResult out;
  out.revision = response.header().revision();
  out.succeeded = response.succeeded();
  const std::vector<TxnOp>& ops = out.succeeded ? txn.success : txn.failure;
  for (int i = 0; i < response.responses_size(); ++i) {
    const TxnOp::Kind kind = i < static_cast<int>(ops.size()) ? ops[i].kind : TxnOp::kGet;
    out.results.push_back(OpResultFromProto(response.responses(i), kind));
  }
  return out;
}

pb::RangeRequest RangeOf(const std::string& key, bool prefix) {
  pb::RangeRequest request;
  SetKeys(key, prefix, &request);
  return request;
}

pb::TxnRequest ToProto(const Txn& txn) {
  pb::TxnRequest out;
  for (const Compare& compare : txn.compares) *out.add_compare() = ToProto(compare);
  for (const TxnOp& op : txn.success) *out.add_success() = ToProto(op);
  for (const TxnOp& op : txn.failure) *out.add_failure() = ToProto(op);
  return out;
}

absl::Status Validate(const Txn& txn) {
  for (const Compare& compare : txn.compares) {
    if (compare.key.empty()) return absl::InvalidArgumentError("Txn: a compare has an empty key");
  }
  for (const std::vector<TxnOp>* ops : {&txn.success, &txn.failure}) {
    for (const TxnOp& op : *ops) {
      const bool prefix = op.kind == TxnOp::kGetPrefix || op.kind == TxnOp::kDeletePrefix;
      if (op.key.empty() && !prefix) return absl::InvalidArgumentError("Txn: an operation has an empty key");
    }
  }
  return absl::OkStatus();
}

}  // namespace tpud::etcd
