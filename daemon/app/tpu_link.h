// Wires TPU recovery into the daemon: the TpuRecovery service (resets off
// the loop) behind Supervisor::Deps::reset_tpu, and the TPU checks behind
// Supervisor::Deps::preflight and `tpuctl doctor`.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/config/config.h"
#include "daemon/supervisor/supervisor.h"
#include "daemon/tpu/tpu_preflight.h"
#include "daemon/tpu/tpu_recovery.h"

namespace tpud {

struct TpuLink {
  std::unique_ptr<TpuRecovery> recovery;  // Null for tpu.reset.backend none.
  std::unique_ptr<TpuPreflight> checks;   // Always: doctor runs without a backend too.

  // Sets deps->reset_tpu when a backend is configured, and deps->preflight
  // when, in addition, tpu.preflight.enabled. The TpuLink must outlive the
  // Supervisor made with `deps`.
  void Wire(const DaemonConfig& config, Supervisor::Deps* deps) const;
};

// Builds both from config.tpu*. Errors: InvalidArgument from the TPU config
// validation.
absl::StatusOr<TpuLink> LinkTpu(boost::asio::io_context& io, const DaemonConfig& config);

}  // namespace tpud
