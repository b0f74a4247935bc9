// The job state machine as data: states, and which transitions are allowed.
// The decisions (when to take which) are machine::Step (job_machine.h), which
// also keeps the sub-states: why a job is stopping (stop, restart, hang) and
// what a job in backoff waits for (a timer, a maintenance event's end, a TPU
// reset). docs/architecture.md has the whole table.
#pragma once

#include <string_view>

namespace tpud {

// After supervisord's process states (supervisor/states.py), with EXITED split
// into SUCCEEDED and FAILED so a finished job says how it finished.
enum class JobState {
  kStopped,    // Not running and not asked to run.
  kStarting,   // Attempt launched; not yet up for start_seconds.
  kRunning,    // Attempt up for at least start_seconds.
  kBackoff,    // An attempt failed; waiting out the restart delay.
  kStopping,   // Asked to stop; walking the stop signal ladder.
  kSucceeded,  // The last attempt exited 0.
  kFailed,     // Gave up: restart budget spent, or the failure cannot be fixed by restarting.
};

// "stopped", "starting", ... (lowercase, as the CLI and metrics show them).
const char* JobStateName(JobState state);

// True when the job table allows `from` -> `to`:
//   stopped   -> starting | backoff   (backoff: the preflight checks failed)
//   starting  -> running | backoff | stopping | succeeded | failed
//   running   -> backoff | stopping | succeeded | failed
//   backoff   -> starting | stopped | failed
//   stopping  -> stopped | backoff | failed   (the latter two when tpud itself stopped a hung attempt)
//   succeeded -> starting | backoff
//   failed    -> starting | backoff
bool IsAllowedTransition(JobState from, JobState to);

// A job with an attempt alive or about to be (starting, running, backoff, stopping).
bool IsActive(JobState state);

inline constexpr JobState kAllJobStates[] = {
    JobState::kStopped,  JobState::kStarting,  JobState::kRunning, JobState::kBackoff,
    JobState::kStopping, JobState::kSucceeded, JobState::kFailed,
};

}  // namespace tpud
