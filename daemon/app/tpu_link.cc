#include "daemon/app/tpu_link.h"

#include <spdlog/spdlog.h>

namespace tpud {

absl::StatusOr<TpuLink> LinkTpu(boost::asio::io_context& io, const DaemonConfig& config) {
  absl::StatusOr<std::unique_ptr<TpuRecovery>> recovery = TpuRecovery::Create(io, config.tpu, config.tpu_reset);
  if (!recovery.ok()) return recovery.status();
  TpuLink link;
  link.recovery = *std::move(recovery);
  link.checks = std::make_unique<TpuPreflight>(config.tpu, config.tpu_preflight, link.recovery.get());
  return link;
}

void TpuLink::Wire(const DaemonConfig& config, Supervisor::Deps* deps) const {
  if (!recovery) return;
  deps->reset_tpu = [&recovery = *recovery](const TpuResetRequest& request,
                                            std::function<void(TpuResetResult)> done) {
    recovery.Reset(request, std::move(done));
  };
  spdlog::info("TPU resets through the {} backend", config.tpu.backend);
  if (config.tpu_preflight.enabled) {
    deps->preflight = [&checks = *checks](const JobSpec& spec, const std::vector<int>& pgids) {
      return checks.Check(spec, pgids);
    };
    recovery->RefreshNode();  // So the first preflight knows the node.
  }
}

}  // namespace tpud
