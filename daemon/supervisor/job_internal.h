// Small helpers shared by job.cc and job_failure.cc. Internal.
#pragma once

#include <chrono>
#include <string>

#include "absl/strings/str_format.h"
#include "daemon/common/clock.h"

namespace tpud::job_internal {

inline std::chrono::nanoseconds ToNanos(double seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Seconds(seconds));
}
inline std::chrono::nanoseconds ToNanos(Seconds seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(seconds);
}
inline std::string FormatSeconds(Seconds s) { return absl::StrFormat("%.1fs", s.count()); }

}  // namespace tpud::job_internal
