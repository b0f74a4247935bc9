#include "daemon/core/backoff.h"

#include <algorithm>
#include <cmath>

namespace tpud {

Seconds BackoffDelay(const RestartPolicy& policy, int restart, double u) {
  const int doublings = std::clamp(restart - 1, 0, 62);
  const double raw = policy.backoff_initial_seconds * std::ldexp(1.0, doublings);
  const double capped = std::min(raw, policy.backoff_max_seconds);
  const double factor = 1.0 - policy.backoff_jitter * std::clamp(u, 0.0, 1.0);
  return Seconds(std::max(0.0, capped * factor));
}

}  // namespace tpud
