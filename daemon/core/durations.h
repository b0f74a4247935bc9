// Durations from config files: bounded when read, converted without overflow.
//
// A spec value such as `grace_seconds: 1e10` is a double; std::chrono's
// duration_cast of it to int64 nanoseconds overflows (1e10 s is 1e19 ns, past
// INT64_MAX ~ 9.2e18), which once made a 1e10 s grace period send SIGKILL
// after 4 ms. Every duration key is therefore checked against
// kMaxDurationSeconds when a config is validated (CheckDurationSeconds), and
// every conversion to a clock duration saturates (ToNanos).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/clock.h"

namespace tpud {

// The longest duration any key accepts: 30 days. Longer waits are mistakes
// (a unit confusion, a missing decimal point), not policies.
inline constexpr double kMaxDurationSeconds = 30.0 * 24 * 3600;

// OK when `seconds` is finite, >= 0 (> 0 when `positive`) and at most
// kMaxDurationSeconds. Otherwise InvalidArgument naming `key`, e.g.
// "stop.grace_seconds: must be at most 2592000 (30 days), got 1e+10".
inline absl::Status CheckDurationSeconds(absl::string_view key, double seconds, bool positive = false) {
  if (!std::isfinite(seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be finite, got ", seconds));
  }
  if (positive ? !(seconds > 0) : !(seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be ", positive ? "> 0" : ">= 0", ", got ", seconds));
  }
  if (seconds > kMaxDurationSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be at most ",
                                                   static_cast<std::int64_t>(kMaxDurationSeconds),
                                                   " (30 days), got ", seconds));
  }
  return absl::OkStatus();
}

// `seconds` as nanoseconds, saturating: NaN and negatives give 0, values past
// what int64 nanoseconds hold (~292 years) give the maximum. Never UB.
inline std::chrono::nanoseconds ToNanos(Seconds seconds) {
  const double ns = seconds.count() * 1e9;
  if (!(ns > 0)) return std::chrono::nanoseconds(0);
  // 9.2e18 is below INT64_MAX and exactly representable as a double.
  constexpr double kMaxNanos = 9.2e18;
  if (ns >= kMaxNanos) return std::chrono::nanoseconds(static_cast<std::int64_t>(kMaxNanos));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}
inline std::chrono::nanoseconds ToNanos(double seconds) { return ToNanos(Seconds(seconds)); }

// "0.1s", "12.0s", "600.1s": a duration in messages and reasons (the one
// format tpud uses for seconds in what people read).
inline std::string FormatSeconds(Seconds s) { return absl::StrFormat("%.1fs", s.count()); }

}  // namespace tpud
