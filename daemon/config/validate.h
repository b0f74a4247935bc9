// The rules every job spec obeys however it arrived (YAML file, request).
// Internal to daemon/config; the public entry point is ValidateJobSpec.
#pragma once

#include <optional>
#include <string>

#include "daemon/config/config.h"

namespace tpud::config_internal {

struct Violation {
  std::string key;     // Relative to the job spec, e.g. "restart.max_restarts".
  std::string reason;  // e.g. "must be >= 0, got -1".
};
using MaybeViolation = std::optional<Violation>;

// The first rule `spec` breaks, if any.
MaybeViolation FindViolation(const JobSpec& spec);

}  // namespace tpud::config_internal
