// The values tpud's etcd client takes and returns: key-values with their
// revisions, the Txn builder (compares, then success or failure operations),
// lease and member facts, and watch updates. Plain data, no gRPC, so a fake
// EtcdClient (etcd_client.h) can use them too.
//
// Field meanings are etcd v3.4's (mvcc/mvccpb/kv.proto and
// etcdserver/etcdserverpb/rpc.proto at v3.4.23, copied in proto/etcd/):
// a revision is the store-wide counter that every write increments; a key's
// create_revision is the revision of its latest creation, mod_revision of its
// latest write, version counts writes since creation (a delete resets it to 0).
// A missing key compares as create_revision = mod_revision = version = 0
// (https://etcd.io/docs/v3.4/learning/api/#transaction).
//
// Thread-safety: plain values; a const object may be shared.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpud::etcd {

// One key as etcd stores it.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // Revision of the key's latest creation.
  int64_t mod_revision = 0;     // Revision of the key's latest write (or, in a DELETE event, of the delete).
  int64_t version = 0;          // Writes since creation; 1 right after creation.
  int64_t lease = 0;            // Lease the key is attached to; 0 = none.

  bool operator==(const KeyValue&) const = default;
};

// What a Get or GetPrefix saw.
struct RangeResult {
  int64_t revision = 0;       // The store revision the read was served at (header.revision).
  std::vector<KeyValue> kvs;  // Sorted by key; empty when nothing matched.
};

// What a Delete did.
struct DeleteResult {
  int64_t revision = 0;  // Store revision after the delete (unchanged when nothing was deleted).
  int64_t deleted = 0;   // Number of keys deleted.
};

// One condition of a Txn, on one key. Build with the factories:
//   Compare::CreateRevision("/tpud/leader", Compare::kEqual, 0)  // the key is absent
//   Compare::ModRevision(key, Compare::kEqual, seen.mod_revision)  // unchanged since read
struct Compare {
  enum Target { kValue, kCreateRevision, kModRevision, kVersion };
  enum Result { kEqual, kNotEqual, kGreater, kLess };

  static Compare Value(std::string key, Result result, std::string value);
  static Compare CreateRevision(std::string key, Result result, int64_t revision);
  static Compare ModRevision(std::string key, Result result, int64_t revision);
  static Compare Version(std::string key, Result result, int64_t version);

  std::string key;
  Target target = kValue;
  Result result = kEqual;
  int64_t number = 0;  // The operand for kCreateRevision, kModRevision, kVersion.
  std::string value;   // The operand for kValue.
};

// One operation inside a Txn.
struct TxnOp {
  enum Kind { kGet, kGetPrefix, kPut, kDelete, kDeletePrefix };

  static TxnOp Get(std::string key);
  static TxnOp GetPrefix(std::string prefix);
  static TxnOp Put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp Delete(std::string key);
  static TxnOp DeletePrefix(std::string prefix);

  Kind kind = kGet;
  std::string key;  // The key, or the prefix for the *Prefix kinds.
  std::string value;
  int64_t lease = 0;  // kPut only; 0 = no lease.
};

// An atomic "if every compare holds then `success` else `failure`". etcd
// applies it as one revision; a key may be written at most once per branch.
// Example, a fenced leader write (IBM/etcd-java#49 for why fencing):
//   Txn().If(Compare::CreateRevision(leader_key, Compare::kEqual, my_create_revision))
//        .Then(TxnOp::Put("/tpud/gang/step", "1200"))
//        .Else(TxnOp::Get(leader_key));
struct Txn {
  Txn& If(Compare compare);
  Txn& Then(TxnOp op);
  Txn& Else(TxnOp op);

  std::vector<Compare> compares;  // All must hold (AND); none = always true.
  std::vector<TxnOp> success;
  std::vector<TxnOp> failure;
};

// The result of one TxnOp of the branch that ran.
struct TxnOpResult {
  TxnOp::Kind kind = TxnOp::kGet;
  std::vector<KeyValue> kvs;  // kGet, kGetPrefix: what matched.
  int64_t deleted = 0;        // kDelete, kDeletePrefix: how many keys.
};

struct TxnResult {
  int64_t revision = 0;              // Store revision after the Txn (header.revision).
  bool succeeded = false;            // True: the compares held and `success` ran.
  std::vector<TxnOpResult> results;  // One per op of the branch that ran, in order.
};

// A lease as granted. etcd raises a TTL below its minimum (ceil(1.5 x election
// timeout), etcd v3.4 etcdserver/server.go) to that minimum; `ttl` is what it
// granted.
struct Lease {
  int64_t id = 0;
  std::chrono::seconds ttl{0};
};

// LeaseTimeToLive: what remains of a live lease.
struct LeaseTimeToLive {
  int64_t id = 0;
  std::chrono::seconds remaining{0};  // Seconds until expiry unless renewed.
  std::chrono::seconds granted{0};    // The TTL it was granted with.
};

// Maintenance.Status of one member.
struct MemberStatus {
  std::string endpoint;       // The endpoint asked, host:port.
  uint64_t member_id = 0;     // The member that answered.
  uint64_t leader = 0;        // The member it believes leads; 0 = none known.
  uint64_t raft_term = 0;
  uint64_t raft_index = 0;
  int64_t revision = 0;       // Its store revision (header.revision).
  std::string version;        // Server version, e.g. "3.4.23".
  std::vector<std::string> errors;  // Alarms and errors it reports.

  bool is_leader() const { return member_id != 0 && member_id == leader; }
};

// One change seen by a watch.
struct WatchEvent {
  enum Type { kPut, kDelete };
  Type type = kPut;
  // kPut: the key as written (version 1 = just created). kDelete: the key and
  // its mod_revision = the revision of the delete; the value is empty.
  KeyValue kv;
  // The key before the event, when the watch asked for prev_kv and etcd still
  // had it (not compacted away).
  std::optional<KeyValue> prev_kv;
};

// What a watch callback receives.
struct WatchUpdate {
  enum Kind {
    // `events`, in revision order, none seen before by this watcher.
    kEvents,
    // The watcher's next revision was compacted away: events were lost. The
    // watcher has stopped. The owner re-reads (GetPrefix at revision R) and
    // starts a new watcher from R + 1.
    kCompacted,
    // etcd canceled the watch for another reason (e.g. permission denied);
    // `reason` says which. The watcher has stopped.
    kCanceled,
  };
  Kind kind = kEvents;
  // kEvents: the revision of the last event; every event of the watched range
  // up to it has now been delivered. kCompacted, kCanceled: the header
  // revision of the response that said so.
  int64_t revision = 0;
  std::vector<WatchEvent> events;  // kEvents only.
  int64_t compact_revision = 0;    // kCompacted: the oldest revision etcd still has.
  std::string reason;              // kCanceled: etcd's cancel_reason.
};

// The range_end that makes [prefix, range_end) all keys starting with
// `prefix`: the prefix with its last byte below 0xff incremented and the
// 0xff bytes after it dropped; "\0" (every key) for an empty or all-0xff
// prefix. As etcd's clientv3.GetPrefixRangeEnd (clientv3/op.go, v3.4).
std::string PrefixRangeEnd(const std::string& prefix);

}  // namespace tpud::etcd
