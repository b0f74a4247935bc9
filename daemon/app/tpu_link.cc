#include "daemon/app/tpu_link.h"

#include <spdlog/spdlog.h>

namespace tpud {

absl::StatusOr<TpuLink> LinkTpu(boost::asio::io_context& io, const DaemonConfig& config, Supervisor& supervisor) {
  absl::StatusOr<std::unique_ptr<TpuRecovery>> recovery = TpuRecovery::Create(io, config.tpu, config.tpu_reset);
  if (!recovery.ok()) return recovery.status();
  TpuLink link;
  link.recovery = *std::move(recovery);
  link.checks = std::make_unique<TpuPreflight>(config.tpu, config.tpu_preflight, link.recovery.get());
  if (!link.recovery) return link;
  supervisor.SetTpuReset([&recovery = *link.recovery](const TpuResetRequest& request,
                                                      std::function<void(TpuResetResult)> done) {
    recovery.Reset(request, std::move(done));
  });
  spdlog::info("TPU resets through the {} backend", config.tpu.backend);
  if (config.tpu_preflight.enabled) {
    supervisor.SetPreflight([&checks = *link.checks](const JobSpec& spec, const std::vector<int>& pgids) {
      return checks.Check(spec, pgids);
    });
    link.recovery->RefreshNode();  // So the first preflight knows the node.
  }
  return link;
}

}  // namespace tpud
