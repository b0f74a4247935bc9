#include "daemon/core/slice_config.h"

#include "absl/strings/str_cat.h"

namespace tpud {

absl::Status ValidateSliceConfig(const SliceConfig& slice) {
  const EtcdConfig& etcd = slice.etcd;
  if (etcd.endpoints.empty()) {
    return absl::InvalidArgumentError("slice.etcd.endpoints: needs at least one host:port");
  }
  for (const std::string& endpoint : etcd.endpoints) {
    if (endpoint.empty()) return absl::InvalidArgumentError("slice.etcd.endpoints: an endpoint is empty");
  }
  if (etcd.prefix.empty() || etcd.prefix.front() != '/' || (etcd.prefix.size() > 1 && etcd.prefix.back() == '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice.etcd.prefix: must start with '/' and not end with one, got \"", etcd.prefix, "\""));
  }
  if (etcd.lease_seconds < kMinLeaseSeconds || etcd.lease_seconds > kMaxLeaseSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("slice.etcd.lease_seconds: must be in ", kMinLeaseSeconds, "..",
                                                   kMaxLeaseSeconds, ", got ", etcd.lease_seconds));
  }
  if (etcd.tls.cert.empty() != etcd.tls.key.empty()) {
    return absl::InvalidArgumentError("slice.etcd.tls.cert: cert and key go together");
  }
  if (slice.name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("slice.name: must not contain '/', got \"", slice.name, "\""));
  }
  if (slice.num_workers && (*slice.num_workers < 1 || *slice.num_workers > kMaxSliceWorkers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice.num_workers: must be in 1..", kMaxSliceWorkers, ", got ", *slice.num_workers));
  }
  if (slice.worker_id && *slice.worker_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("slice.worker_id: must be >= 0, got ", *slice.worker_id));
  }
  if (slice.worker_id && slice.num_workers && *slice.worker_id >= *slice.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("slice.worker_id: must be below num_workers (",
                                                   *slice.num_workers, "), got ", *slice.worker_id));
  }
  return absl::OkStatus();
}

}  // namespace tpud
