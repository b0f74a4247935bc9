#include "daemon/app/attempt_recovery.h"

#include <spdlog/spdlog.h>

#include "daemon/shim/wire/attempt_dir.h"

namespace tpud {

Supervisor::Reattached ReattachAttempts(ShimLauncher& launcher, Supervisor& supervisor,
                                        const std::filesystem::path& state_dir) {
  Supervisor::Reattached attempts;
  for (const std::filesystem::path& dir : ShimLauncher::ListAttemptDirs(state_dir)) {
    absl::StatusOr<LaunchSpec> spec = shim::ReadSpecFile(dir / "spec.json");
    if (!spec.ok()) {
      spdlog::error("{}: not re-attached: {}", dir.string(), std::string(spec.status().message()));
      continue;
    }
    Job* job = supervisor.FindJob(spec->job);
    if (job == nullptr) {
      spdlog::warn("{}: job {} is no longer configured; its attempt is left alone", dir.string(), spec->job);
      continue;
    }
    absl::StatusOr<std::unique_ptr<Attempt>> attempt = launcher.Reattach(dir, job);
    if (!attempt.ok()) {
      spdlog::error("job {}: attempt {} not re-attached: {}", spec->job, spec->attempt,
                    std::string(attempt.status().message()));
      continue;
    }
    auto& slot = attempts[spec->job];
    if (slot.second && slot.first > spec->attempt) continue;  // Keep the newest attempt.
    slot = {spec->attempt, std::move(*attempt)};
  }
  return attempts;
}

}  // namespace tpud
