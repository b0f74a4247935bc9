// Rendering of tpud API messages for people (tables, detail views, event lines)
// and for scripts (JSON). Pure functions: no I/O, no clock, no daemon.
//
// This file's .cc is the only client file that includes nlohmann/json; the
// JSON shapes below are a public contract of `tpuctl ... --json`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpud/v1/tpud.pb.h"

namespace tpud::client {

// "running" for JOB_STATE_RUNNING: the enum name without "JOB_STATE_", in
// lowercase. "unknown" for JOB_STATE_UNSPECIFIED and for values this client
// does not know.
std::string StateName(tpud::v1::JobState state);

// A duration for people, two units at most: "0s", "45s", "5m07s", "1h02m",
// "3d04h". Fractions are truncated; negative or non-finite inputs give "0s".
std::string FormatUptime(double seconds);

// Milliseconds since the Unix epoch as UTC ISO 8601 with milliseconds:
// "2026-11-21T10:00:00.123Z".
std::string FormatUtcTime(std::int64_t unix_ms);

// "step 300" for a found checkpoint with a known step; the file name of the
// path when its step is unknown (< 0); "-" when none was found.
std::string FormatCheckpoint(const tpud::v1::Checkpoint& checkpoint);

// Short form of how the last attempt ended: "-" when none has ended yet,
// "exit 3", "SIGKILL" (or "signal 77" without a name), "spawn failed".
std::string FormatLastExit(const tpud::v1::ExitInfo& exit);

// An aligned table, one row per job, header first, each line ending in '\n':
//   NAME  STATE  PID  ATTEMPT  RESTARTS  UPTIME  CHECKPOINT  LAST-EXIT  REASON
// Columns are left-aligned and separated by at least two spaces; the last
// column (REASON) is not padded, so no line has trailing blanks. PID is "-"
// when 0, RESTARTS is "restarts/max_restarts", UPTIME is "-" unless the job is
// starting, running or stopping. An empty list gives the header alone.
std::string FormatStatusTable(const std::vector<tpud::v1::JobStatus>& jobs);

// Several "key: value" lines describing one job in full (state and since
// when, reason, pid, attempt and restarts, uptime or backoff left,
// checkpoint with its path, last exit, command, working dir, origin, log).
std::string FormatJobDetail(const tpud::v1::JobStatus& job);

// The status line printed by start/stop/restart: "digits: running (pid 4242,
// attempt 2) started" — name, state, pid/attempt when known, then the reason.
std::string FormatJobLine(const tpud::v1::JobStatus& job);

// One JSON object (compact, no trailing newline) for one job:
//   {"name": str, "state": "running", "pid": int|null (null when 0),
//    "attempt": int, "restarts": int, "max_restarts": int,
//    "last_exit": {"exited": bool, "code": int|null, "signal": int|null,
//                  "signal_name": str|null, "description": str},
//    "checkpoint": {"path": str|null, "step": int|null},
//    "reason": str, "uptime_seconds": number,
//    "backoff_remaining_seconds": number, "command": [str...],
//    "working_dir": str, "origin": str, "log_path": str,
//    "state_since": "2026-...Z"|null, "state_since_unix_ms": int}
// last_exit.code is set only for a normal exit, signal/signal_name only when
// killed by a signal; both are null before the first exit and for spawn
// failures. checkpoint.step is null when unknown or none.
std::string JobJson(const tpud::v1::JobStatus& job);

// A JSON array of JobJson objects, in the given order ("[]" when empty).
std::string JobsJson(const std::vector<tpud::v1::JobStatus>& jobs);

// One line per event, without '\n':
//   "2026-11-21T10:00:00.123Z digits starting -> running attempt=2 reason"
// with " step=300" after the attempt when the event carries a found
// checkpoint, and " code=3" or " signal=SIGKILL" when it carries an exit.
std::string FormatEventLine(const tpud::v1::JobEvent& event);

// One compact JSON object per event (a JSON-lines record, no newline):
//   {"sequence": int, "time": "2026-...Z", "time_unix_ms": int, "job": str,
//    "from": "starting", "to": "running", "attempt": int, "reason": str,
//    "exit": {..as last_exit..}|null, "checkpoint": {"path","step"}|null}
// "exit" is null unless the event reports an ended attempt (exit.exited);
// "checkpoint" is null unless the event carries one (transitions into
// starting), and then has null path/step when none was found.
std::string EventJson(const tpud::v1::JobEvent& event);

// "key: value" lines for `tpuctl info`; `socket_path` is where we connected.
std::string FormatDaemonInfo(const tpud::v1::GetDaemonInfoResponse& info,
                             const std::string& socket_path);

// The same as a compact JSON object: {"version", "pid", "metrics_address",
// "config_path", "start_time": iso|null, "start_time_unix_ms", "socket"}.
std::string DaemonInfoJson(const tpud::v1::GetDaemonInfoResponse& info,
                           const std::string& socket_path);

}  // namespace tpud::client
