// MakeTpuControl: the only place that knows every backend.
#include <memory>
#include <utility>

#include "daemon/tpu/api_control.h"
#include "daemon/tpu/gcloud_control.h"
#include "daemon/tpu/local_control.h"
#include "daemon/tpu/tpu_control.h"

namespace tpud {

absl::StatusOr<std::unique_ptr<TpuControl>> MakeTpuControl(const TpuConfig& config, TpuDeps deps) {
  if (absl::Status s = ValidateTpuConfig(config); !s.ok()) return s;
  if (config.backend == "none") return std::unique_ptr<TpuControl>();
  if (!deps.clock) deps.clock = SystemWaitClock();
  if (config.backend == "local") return std::make_unique<LocalTpuControl>(config, deps.clock);
  if (!deps.http) deps.http = NewCurlHttpClient();
  if (!deps.metadata) {
    deps.metadata = std::make_shared<MetadataClient>(MetadataBaseUrl(config.metadata_host), deps.http);
  }
  if (config.backend == "gcloud")
    return std::make_unique<GcloudTpuControl>(config, deps.metadata, deps.clock);
  return std::make_unique<ApiTpuControl>(config, deps.http, deps.metadata, deps.clock);
}

}  // namespace tpud
