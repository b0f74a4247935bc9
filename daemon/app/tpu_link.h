// Wires TPU recovery into the daemon (issue 4): the TpuRecovery service
// (resets off the loop) behind Supervisor::SetTpuReset, and the TPU checks
// behind Supervisor::SetPreflight and `tpuctl doctor`.
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
};

// Builds both from config.tpu*, and hands them to `supervisor` (before any job
// is added): resets when a backend is configured; preflight checks when, in
// addition, tpu.preflight.enabled. Errors: InvalidArgument from the TPU config
// validation. The result must outlive the supervisor's jobs' use of it:
// declare it after the Supervisor, so it is destroyed first.
absl::StatusOr<TpuLink> LinkTpu(boost::asio::io_context& io, const DaemonConfig& config, Supervisor& supervisor);

}  // namespace tpud
