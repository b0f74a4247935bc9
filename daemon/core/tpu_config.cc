#include "daemon/core/tpu_config.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/durations.h"

namespace tpud {
namespace {

absl::Status Bad(const char* key, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat("tpu.", key, ": ", reason));
}

absl::Status Positive(const char* key, double value) {
  return CheckDurationSeconds(absl::StrCat("tpu.", key), value, /*positive=*/true);
}

absl::Status CheckNumbers(const TpuConfig& c) {
  const std::pair<const char*, double> positive[] = {
      {"timeout_seconds", c.timeout_seconds},
      {"poll_interval_seconds", c.poll_interval_seconds},
      {"request_timeout_seconds", c.request_timeout_seconds},
      {"retry_initial_seconds", c.retry_initial_seconds},
      {"retry_max_seconds", c.retry_max_seconds},
      {"gcloud_timeout_seconds", c.gcloud_timeout_seconds},
      {"stop_grace_seconds", c.stop_grace_seconds},
      {"local_poll_interval_seconds", c.local_poll_interval_seconds},
  };
  for (const auto& [key, value] : positive) {
    if (absl::Status s = Positive(key, value); !s.ok()) return s;
  }
  if (c.max_attempts < 1) return Bad("max_attempts", absl::StrCat("must be >= 1, got ", c.max_attempts));
  return absl::OkStatus();
}

absl::Status CheckLocal(const TpuConfig& c) {
  if (c.device_globs.empty()) return Bad("device_globs", "must name at least one pattern");
  for (const std::string& glob : c.device_globs) {
    if (!absl::StartsWith(glob, "/")) return Bad("device_globs", "\"" + glob + "\" is not an absolute path");
  }
  if (!c.lock_file.empty() && !absl::StartsWith(c.lock_file, "/")) {
    return Bad("lock_file", "\"" + c.lock_file + "\" is not an absolute path");
  }
  if (c.stop_signals.empty()) return Bad("stop_signals", "must name at least one signal");
  for (int signal : c.stop_signals) {
    if (signal < 1 || signal > 64) return Bad("stop_signals", absl::StrCat("bad signal number ", signal));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTpuConfig(const TpuConfig& c) {
  if (c.backend != "none" && c.backend != "api" && c.backend != "gcloud" && c.backend != "local") {
    return Bad("backend", "must be one of none, api, gcloud, local; got \"" + c.backend + "\"");
  }
  if (absl::Status s = CheckNumbers(c); !s.ok()) return s;
  if (!absl::StartsWith(c.api_endpoint, "http://") && !absl::StartsWith(c.api_endpoint, "https://")) {
    return Bad("api_endpoint", "must start with http:// or https://, got \"" + c.api_endpoint + "\"");
  }
  if (c.gcloud_path.empty()) return Bad("gcloud_path", "must not be empty");
  return CheckLocal(c);
}

absl::Status ValidateTpuResetPolicy(const TpuResetPolicy& p) {
  if (p.max_resets_per_hour < 0) {
    return Bad("reset.max_resets_per_hour", absl::StrCat("must be >= 0, got ", p.max_resets_per_hour));
  }
  if (absl::Status s = CheckDurationSeconds("tpu.reset.backoff_initial_seconds", p.backoff_initial_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckDurationSeconds("tpu.reset.backoff_max_seconds", p.backoff_max_seconds); !s.ok()) {
    return s;
  }
  if (p.backoff_max_seconds < p.backoff_initial_seconds) {
    return Bad("reset.backoff_max_seconds",
               absl::StrCat("must be >= backoff_initial_seconds (", p.backoff_initial_seconds, "), got ",
                            p.backoff_max_seconds));
  }
  return absl::OkStatus();
}

}  // namespace tpud
