// Rendering of tpud API messages for people (tables, detail views, event lines)
// and for scripts (JSON). Pure functions: no I/O, no clock, no daemon.
//
// Only the format*.cc files include nlohmann/json; the JSON shapes below are
// a public contract of `tpuctl ... --json`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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

// A duration of downtime: "12.3s" under a minute (rounded to a tenth), else
// as FormatUptime ("5m07s"). Negative or non-finite inputs give "0.0s".
std::string FormatDowntime(double seconds);

// An output line of a job made safe for a terminal and short: ANSI escape
// sequences (ESC [ ... final byte) removed, other control characters (tab,
// CR...) turned into spaces, surrounding blanks trimmed, and when longer than
// `max_chars` code points (at least 4), cut to max_chars - 3 followed by
// "...". Never splits a UTF-8 sequence. No quotes added.
std::string FormatMatchedLine(std::string_view line, std::size_t max_chars);

// An aligned table, one row per job, header first, each line ending in '\n':
//   NAME  STATE  PID  ATTEMPT  RESTARTS  UPTIME  STEP  CHECKPOINT  LAST-EXIT  REASON
// Columns are left-aligned and separated by at least two spaces; the last
// column (REASON) is not padded, so no line has trailing blanks. PID is "-"
// when 0, RESTARTS is "restarts/max_restarts", UPTIME is "-" unless the job is
// starting, running or stopping, STEP is last_step ("-" when unknown).
// LAST-EXIT is FormatLastExit, prefixed by the failure class when the last
// incident is that exit's: "hbm_oom (exit 1)". An empty list gives the header
// alone.
std::string FormatStatusTable(const std::vector<tpud::v1::JobStatus>& jobs);

// Several "key: value" lines describing one job in full (state and since
// when, reason, pid, attempt and restarts, uptime or backoff left, last step
// when known, checkpoint with its path, last exit, failures by class when
// any, command, working dir, origin, log), then, when the job has had an
// incident, a "last failure:" block of indented "key: value" lines: incident
// id/attempt/time, class, action, hint, the matched line (quoted, through
// FormatMatchedLine to 100 characters; "-" when the exit status decided),
// rule, exit, steps (reached, resumed from, lost), downtime, outcome, and
// whether it counted against max_restarts.
std::string FormatJobDetail(const tpud::v1::JobStatus& job);

// Where a stop ladder is: "sent SIGTERM (2 of 4), SIGQUIT in 25.0s"; "no
// signal sent yet" before the first rung; no "in" part after the last.
std::string FormatStopRung(const tpud::v1::StopProgress& stop);

// The status line printed by start/stop/restart: "digits: running (pid 4242,
// attempt 2) started" — name, state, pid/attempt when known, then the reason;
// a stopping job adds FormatStopRung after "; ".
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
//    "state_since": "2026-...Z"|null, "state_since_unix_ms": int,
//    "last_step": int|null, "failures_by_class": {"hbm_oom": int, ...},
//    "last_failure": {..as IncidentJson without "type"..}|null}
// last_exit.code is set only for a normal exit, signal/signal_name only when
// killed by a signal; both are null before the first exit and for spawn
// failures. checkpoint.step is null when unknown or none; last_step is null
// when unknown; last_failure is null when the job never failed;
// failures_by_class has its keys sorted ({} when none).
std::string JobJson(const tpud::v1::JobStatus& job);

// A JSON array of JobJson objects, in the given order ("[]" when empty).
std::string JobsJson(const std::vector<tpud::v1::JobStatus>& jobs);

// One line per event, without '\n':
//   "2026-11-21T10:00:00.123Z digits starting -> running attempt=2 reason"
// with " step=300" after the attempt when the event carries a found
// checkpoint, and " code=3" or " signal=SIGKILL" when it carries an exit.
std::string FormatEventLine(const tpud::v1::JobEvent& event);

// One compact JSON object per event (a JSON-lines record, no newline):
//   {"type": "transition", "sequence": int, "time": "2026-...Z",
//    "time_unix_ms": int, "job": str,
//    "from": "starting", "to": "running", "attempt": int, "reason": str,
//    "exit": {..as last_exit..}|null, "checkpoint": {"path","step"}|null}
// "exit" is null unless the event reports an ended attempt (exit.exited);
// "checkpoint" is null unless the event carries one (transitions into
// starting), and then has null path/step when none was found.
std::string EventJson(const tpud::v1::JobEvent& event);

// One line per incident update, without '\n', set apart from state changes
// by "INCIDENT #id":
//   "2026-11-21T10:00:00.123Z digits INCIDENT #2 attempt=3
//    class=deadline_exceeded action=reset_and_restart code=1 step=1234
//    resumed=1200 lost=34 downtime=12.3s restarted \"matched line\""
// (one line). The exit part is as in FormatEventLine; step, resumed and lost
// appear only when known; a TPU reset made for it adds
// " reset=BACKEND:DURATION:ok|failed" before the outcome. A closed incident shows downtime=FormatDowntime and
// its outcome; an open one shows "open" (": outcome" when there is one) and
// no downtime; the outcome goes through FormatMatchedLine to 60 characters. The matched line, when there is one, comes last, quoted,
// through FormatMatchedLine to 100 characters.
std::string FormatIncidentLine(const tpud::v1::Incident& incident);

// One compact JSON object per incident update (no newline):
//   {"type": "incident", "id": int, "time": "2026-...Z"|null,
//    "time_unix_ms": int, "job": str, "attempt": int, "class": str,
//    "action": str, "hint": str, "matched_line": str, "rule": str,
//    "exit": {..as last_exit..}|null, "counted": bool,
//    "step_reached": int|null, "checkpoint_step": int|null,
//    "steps_lost": int|null, "downtime_seconds": number, "open": bool,
//    "outcome": str, "reset_backend": str|null,
//    "reset_duration_seconds": number|null, "reset_result": str|null}
// (the reset_* keys are null when no TPU reset was made for it)
// matched_line is whole (not shortened) and "" when the exit status decided;
// exit is null unless it reports an ended attempt; step_reached,
// checkpoint_step and steps_lost are null when unknown (the API's -1);
// downtime_seconds is what the daemon reports (0 while open, unless it sends
// the time so far).
std::string IncidentJson(const tpud::v1::Incident& incident);

// "key: value" lines for `tpuctl info`; `socket_path` is where we connected.
std::string FormatDaemonInfo(const tpud::v1::GetDaemonInfoResponse& info,
                             const std::string& socket_path);

// The same as a compact JSON object: {"version", "pid", "metrics_address",
// "config_path", "start_time": iso|null, "start_time_unix_ms", "socket"}.
std::string DaemonInfoJson(const tpud::v1::GetDaemonInfoResponse& info,
                           const std::string& socket_path);

}  // namespace tpud::client
