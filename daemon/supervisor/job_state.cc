#include "daemon/supervisor/job_state.h"

#include <initializer_list>

namespace tpud {
namespace {

struct Transition {
  JobState from;
  std::initializer_list<JobState> to;
};

using S = JobState;
const Transition kTransitions[] = {
    // -> kBackoff from an inactive state: the preflight checks delay a start.
    {S::kStopped, {S::kStarting, S::kBackoff}},
    {S::kStarting, {S::kRunning, S::kBackoff, S::kStopping, S::kSucceeded, S::kFailed}},
    {S::kRunning, {S::kBackoff, S::kStopping, S::kSucceeded, S::kFailed}},
    {S::kBackoff, {S::kStarting, S::kStopped, S::kFailed}},
    {S::kStopping, {S::kStopped, S::kBackoff, S::kFailed}},
    {S::kSucceeded, {S::kStarting, S::kBackoff}},
    {S::kFailed, {S::kStarting, S::kBackoff}},
};

}  // namespace

const char* JobStateName(JobState state) {
  switch (state) {
    case S::kStopped: return "stopped";
    case S::kStarting: return "starting";
    case S::kRunning: return "running";
    case S::kBackoff: return "backoff";
    case S::kStopping: return "stopping";
    case S::kSucceeded: return "succeeded";
    case S::kFailed: return "failed";
  }
  return "unknown";
}

bool IsAllowedTransition(JobState from, JobState to) {
  for (const Transition& t : kTransitions) {
    if (t.from != from) continue;
    for (JobState allowed : t.to) {
      if (allowed == to) return true;
    }
  }
  return false;
}

bool IsActive(JobState state) {
  return state == S::kStarting || state == S::kRunning || state == S::kBackoff ||
         state == S::kStopping;
}

}  // namespace tpud
