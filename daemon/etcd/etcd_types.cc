#include "daemon/etcd/etcd_types.h"

#include <utility>

namespace tpud::etcd {
namespace {

Compare NumberCompare(std::string key, Compare::Target target, Compare::Result result, int64_t number) {
  Compare c;
  c.key = std::move(key);
  c.target = target;
  c.result = result;
  c.number = number;
  return c;
}

TxnOp Op(TxnOp::Kind kind, std::string key, std::string value = {}, int64_t lease = 0) {
  TxnOp op;
  op.kind = kind;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

}  // namespace

Compare Compare::Value(std::string key, Result result, std::string value) {
  Compare c;
  c.key = std::move(key);
  c.target = kValue;
  c.result = result;
  c.value = std::move(value);
  return c;
}

Compare Compare::CreateRevision(std::string key, Result result, int64_t revision) {
  return NumberCompare(std::move(key), kCreateRevision, result, revision);
}

Compare Compare::ModRevision(std::string key, Result result, int64_t revision) {
  return NumberCompare(std::move(key), kModRevision, result, revision);
}

Compare Compare::Version(std::string key, Result result, int64_t version) {
  return NumberCompare(std::move(key), kVersion, result, version);
}

TxnOp TxnOp::Get(std::string key) { return Op(kGet, std::move(key)); }
TxnOp TxnOp::GetPrefix(std::string prefix) { return Op(kGetPrefix, std::move(prefix)); }
TxnOp TxnOp::Put(std::string key, std::string value, int64_t lease) {
  return Op(kPut, std::move(key), std::move(value), lease);
}
TxnOp TxnOp::Delete(std::string key) { return Op(kDelete, std::move(key)); }
TxnOp TxnOp::DeletePrefix(std::string prefix) { return Op(kDeletePrefix, std::move(prefix)); }

Txn& Txn::If(Compare compare) {
  compares.push_back(std::move(compare));
  return *this;
}

Txn& Txn::Then(TxnOp op) {
  success.push_back(std::move(op));
  return *this;
}

Txn& Txn::Else(TxnOp op) {
  failure.push_back(std::move(op));
  return *this;
}

std::string PrefixRangeEnd(const std::string& prefix) {
  std::string end = prefix;
  for (std::size_t i = end.size(); i > 0; --i) {
    const auto byte = static_cast<unsigned char>(end[i - 1]);
    if (byte < 0xff) {
      end[i - 1] = static_cast<char>(byte + 1);
      end.resize(i);
      return end;
    }
  }
  return std::string(1, '\0');  // No key is greater than every key with this prefix: to the end.
}

}  // namespace tpud::etcd
