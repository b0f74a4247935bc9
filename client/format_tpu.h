// How tpuctl shows the TPU: `tpuctl tpu`, `tpuctl reset-tpu` and
// the `tpuctl doctor` checklist. Pure functions of the responses.
#pragma once

#include <string>

#include "tpud/v1/tpud.pb.h"

namespace tpud::client {

// "key: value" lines: backend, node (name and accelerator type), state,
// health (with its description), symptoms (one indented line each: time,
// type, worker, details), resets ("N in the last hour (max M)"), running,
// last reset. A node that could not be described shows "node: unknown:
// <error>" and no state/health lines.
std::string FormatTpu(const tpud::v1::GetTpuResponse& tpu);
// The same as one compact JSON object: {"backend", "node": {name, state,
// health, health_description, accelerator_type, symptoms: [...]}|null,
// "node_error", "resets_last_hour", "max_resets_per_hour", "running",
// "queued", "last_reset": {..TpuResetJson..}|null}.
std::string TpuJson(const tpud::v1::GetTpuResponse& tpu);

// One line: "TPU reset (api) done in 41.2s" / "TPU reset (api) failed after
// 0.2s: <result>" / "TPU reset: nothing to do".
std::string FormatTpuReset(const tpud::v1::TpuReset& reset);

// The checklist: per job a "job NAME:" line (omitted for the host-only entry
// with an empty name), then one line per check, "  ✓ name  detail" or
// "  ✗ name  detail" followed by "      fix: ..." for a failed one.
std::string FormatDoctor(const tpud::v1::DoctorResponse& doctor);
// How many checks failed, over all jobs.
int FailedChecks(const tpud::v1::DoctorResponse& doctor);

}  // namespace tpud::client
