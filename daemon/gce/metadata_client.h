// A client for the GCE metadata server, as seen from a Cloud TPU VM.
//
// Facts (sources: the Compute Engine "querying metadata" docs,
// https://cloud.google.com/compute/docs/metadata/querying-metadata; jax
// `_src/clusters/cloud_tpu_cluster.py`; torch_xla `_internal/tpu.py`):
//   * base URL http://metadata.google.internal/computeMetadata/v1/; the header
//     `Metadata-Flavor: Google` is mandatory on requests, and the server sends
//     it back (a response without it is not from the metadata server);
//   * GCE_METADATA_HOST / GCE_METADATA_IP override the host (JAX and the Google
//     client libraries honour them);
//   * long poll `?wait_for_change=true&last_etag=ETAG&timeout_sec=N`, the value's
//     etag in the `ETag` response header; not allowed on the token URL;
//   * the server may answer 503 for under a second during maintenance: retry.
//   * keys used by tpud: `instance/preempted` (TRUE/FALSE),
//     `instance/maintenance-event` (NONE | MIGRATE_ON_HOST_MAINTENANCE |
//     TERMINATE_ON_HOST_MAINTENANCE), `project/project-id`, `instance/zone`
//     (`projects/NUM/zones/ZONE`), `instance/name`, `instance/attributes/*`.
// Requests never go through a proxy (the server is link-local).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/gce/http_client.h"

namespace tpud {

inline constexpr char kDefaultMetadataHost[] = "metadata.google.internal";
inline constexpr char kPreemptedKey[] = "instance/preempted";
inline constexpr char kMaintenanceEventKey[] = "instance/maintenance-event";

// "http://HOST/computeMetadata/v1/" where HOST ("host" or "host:port") is the
// first non-empty of: `host_override` (tpud's config), $GCE_METADATA_HOST,
// $GCE_METADATA_IP, kDefaultMetadataHost. Reads the environment.
std::string MetadataBaseUrl(std::string_view host_override = "");

// A value and its etag (empty when the server sent no ETag).
struct MetadataValue {
  std::string value;
  std::string etag;
};

// Timeouts of a MetadataClient.
struct MetadataClientOptions {
  std::chrono::milliseconds get_timeout{5000};        // A plain Get.
  std::chrono::milliseconds probe_timeout{1000};      // Probe: short, the answer is local.
  std::chrono::milliseconds long_poll_slack{10'000};  // Added to timeout_sec for WaitForChange.
};

// Thread-safety: const methods are safe from any number of threads (each
// request is independent). `cancel`, where taken, aborts the request promptly
// from another thread (Cancelled).
class MetadataClient {
 public:
  // `base_url` must end in '/'; `http` null means libcurl.
  explicit MetadataClient(std::string base_url = MetadataBaseUrl(),
                          std::shared_ptr<HttpClient> http = nullptr, MetadataClientOptions options = {});

  // GETs `path` (relative to the base URL, e.g. "instance/zone"). Errors, each
  // naming the path: transport errors as HttpClient::Get; Unavailable when the
  // response lacks `Metadata-Flavor: Google` or the status is 429/5xx (retry);
  // NotFound (404), PermissionDenied (403), InvalidArgument (400), Unknown for
  // other non-200 statuses.
  absl::StatusOr<MetadataValue> Get(std::string_view path, HttpCancel* cancel = nullptr) const;

  // Long poll: returns when the value's etag differs from `last_etag` (at once
  // if it already does), or after `timeout_sec` seconds with the current value
  // (then its etag equals `last_etag`). An empty `last_etag` waits for the next
  // change after the request arrives. `timeout_sec` >= 1 (InvalidArgument
  // otherwise); the HTTP timeout is timeout_sec + long_poll_slack. Errors as Get.
  absl::StatusOr<MetadataValue> WaitForChange(std::string_view path, std::string_view last_etag,
                                              int timeout_sec, HttpCancel* cancel = nullptr) const;

  // OK when a metadata server answers the base URL within probe_timeout (so
  // tpud runs on GCE); otherwise the reason. Never logs.
  absl::Status Probe() const;

  const std::string& base_url() const { return base_url_; }

 private:
  absl::StatusOr<MetadataValue> Fetch(std::string_view path, const std::string& query,
                                      std::chrono::milliseconds timeout, HttpCancel* cancel) const;

  std::string base_url_;
  std::shared_ptr<HttpClient> http_;
  MetadataClientOptions options_;
};

}  // namespace tpud
