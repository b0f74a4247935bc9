#include "daemon/core/gang.h"

#include <algorithm>
#include <set>

namespace tpud {

const char* GangPhaseName(GangPhase phase) {
  switch (phase) {
    case GangPhase::kStopping: return "stopping";
    case GangPhase::kStarting: return "starting";
    case GangPhase::kStopped: return "stopped";
    case GangPhase::kFailed: return "failed";
  }
  return "stopping";
}

std::optional<GangPhase> ParseGangPhase(const std::string& name) {
  for (GangPhase phase : {GangPhase::kStopping, GangPhase::kStarting, GangPhase::kStopped, GangPhase::kFailed}) {
    if (name == GangPhaseName(phase)) return phase;
  }
  return std::nullopt;
}

std::optional<std::int64_t> CommonStep(const std::vector<GangReport>& reports) {
  if (reports.empty()) return std::nullopt;
  std::set<std::int64_t> common(reports.front().steps.begin(), reports.front().steps.end());
  for (std::size_t i = 1; i < reports.size(); ++i) {
    std::set<std::int64_t> next;
    for (std::int64_t step : reports[i].steps) {
      if (common.count(step) != 0) next.insert(step);
    }
    common = std::move(next);
  }
  if (common.empty()) return std::nullopt;
  return *common.rbegin();
}

}  // namespace tpud
