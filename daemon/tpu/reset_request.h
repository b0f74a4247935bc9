// What a job and the TPU control exchange: a reset a failed attempt asks
// for, its result, and the verdict of the checks before an attempt. The job
// (daemon/supervisor/job.h) asks through JobDeps; TpuRecovery and
// TpuPreflight (this folder) answer.
#pragma once

#include <string>
#include <vector>
#include <optional>

#include "absl/status/status.h"
#include "daemon/core/clock.h"
#include "daemon/core/failure_rule.h"

namespace tpud {

// A TPU reset asked for by a failed attempt.
struct TpuResetRequest {
  std::string job;
  FailureClass failure_class = FailureClass::kUnknown;  // Picks the rung: local, node, start.
  std::vector<int> spare_pgids;  // Process groups the reset must not signal.
};
struct TpuResetResult {
  bool attempted = false;  // False: no backend, or nothing to do for this class.
  std::string backend;     // "api", "gcloud", "local".
  Seconds duration{0};
  absl::Status status;     // Ok, or why the reset failed (the restart goes ahead anyway).
};

// The checks made right before each attempt.
struct PreflightVerdict {
  absl::Status status;                    // OK: launch. Else why not, e.g. "node: node state PREEMPTED".
  std::optional<FailureClass> reset_for;  // A TPU reset (reset_tpu, this class) that may fix it.
};

}  // namespace tpud
