// Small helpers shared by job.cc and job_failure.cc. Internal.
#pragma once

#include <chrono>
#include <string>

#include "absl/strings/str_format.h"
#include "daemon/common/clock.h"
#include "daemon/common/durations.h"

namespace tpud::job_internal {

using tpud::ToNanos;  // Saturating (common/durations.h).
inline std::string FormatSeconds(Seconds s) { return absl::StrFormat("%.1fs", s.count()); }

}  // namespace tpud::job_internal
