// At startup: find the attempts an earlier tpud left running under their
// shims and re-attach each to its job.
#pragma once

#include <filesystem>

#include "daemon/launch/shim_launcher.h"
#include "daemon/supervisor/supervisor.h"

namespace tpud {

// For every attempt directory under `state_dir`: reads its spec, finds the
// job, and Reattach()es the job to it (running on, or delivering the exit it
// left in exit.json). Directories whose job is no longer known, or that
// cannot be re-attached, are logged and left in place for a person to look
// at (tpud never deletes what it cannot account for).
Supervisor::Reattached ReattachAttempts(ShimLauncher& launcher, Supervisor& supervisor,
                                        const std::filesystem::path& state_dir);

}  // namespace tpud
