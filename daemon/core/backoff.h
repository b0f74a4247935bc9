// The restart delay: exponential, capped, with jitter.
#pragma once

#include "daemon/core/clock.h"
#include "daemon/core/job_spec.h"

namespace tpud {

// Delay before restart number `restart` (1 for the first restart):
//   min(backoff_max_seconds, backoff_initial_seconds * 2^(restart-1)) * (1 - backoff_jitter * u)
// with `u` uniform in [0, 1). Jitter only shortens the delay, so the cap holds
// and a fleet of jobs that failed together does not restart in lockstep.
Seconds BackoffDelay(const RestartPolicy& policy, int restart, double u);

}  // namespace tpud
