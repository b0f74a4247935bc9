// The daemon config's `slice:` section: the multi-host slice this tpud is one
// worker of, and the etcd cluster its workers agree through (daemon/slice/).
// Absent: tpud supervises this VM alone, and `gang: true` jobs are refused.
//
//   slice:
//     etcd:
//       endpoints: ["10.0.0.5:2379", "http://10.0.0.6:2379"]  # host:port or http(s)://host:port
//       prefix: /tpud          # every key tpud writes is under PREFIX/slices/NAME/
//       lease_seconds: 15      # worker liveness: a worker is lost this long after its tpud is gone
//       tls: {ca: "", cert: "", key: ""}
//     name: ""                 # default tpu.name, else $TPU_NAME
//     worker_id: auto          # default metadata agent-worker-number, else $TPU_WORKER_ID
//     num_workers: auto        # default entries of metadata worker-network-endpoints, else $TPU_WORKER_HOSTNAMES
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tpud {

struct EtcdTlsConfig {
  std::filesystem::path ca, cert, key;  // All empty: plaintext (unless an endpoint says https://).
  bool operator==(const EtcdTlsConfig&) const = default;
};

struct EtcdConfig {
  std::vector<std::string> endpoints;
  std::string prefix = "/tpud";
  int lease_seconds = 15;
  EtcdTlsConfig tls;
  bool operator==(const EtcdConfig&) const = default;
};

struct SliceConfig {
  EtcdConfig etcd;
  std::string name;                  // Empty: tpu.name, else $TPU_NAME.
  std::optional<int> worker_id;      // nullopt: auto.
  std::optional<int> num_workers;    // nullopt: auto.
  bool operator==(const SliceConfig&) const = default;
};

inline constexpr int kMinLeaseSeconds = 2;
inline constexpr int kMaxLeaseSeconds = 300;
inline constexpr int kMaxSliceWorkers = 4096;

// InvalidArgument naming the key ("slice.etcd.lease_seconds: must be in 2..300,
// got 1") for values out of range: no endpoint, a prefix not starting with
// '/' or ending with one, cert without key, a worker id not below the count.
absl::Status ValidateSliceConfig(const SliceConfig& slice);

}  // namespace tpud
