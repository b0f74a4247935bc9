// The tpuctl commands: each builds its request(s), calls tpud through a
// Supervisor stub and prints the answer with client/format.h.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/call.h"
#include "client/connection.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud::client {

// Request builders; they do no RPC, so `start` can fail on its input before
// connecting.

// Starts the job configured as `name`.
tpud::v1::StartJobRequest ConfiguredStartRequest(const std::string& name);

// Reads the YAML spec at `file` ("-" reads stdin) into spec_yaml, with
// spec_source set to its absolute path ("<stdin>" for "-"); name is left
// alone (when empty, the daemon takes it from the spec). Fails with kExitNoInput and
// "cannot read FILE: REASON" when the file cannot be read.
Result SpecFileStartRequest(const std::string& file, tpud::v1::StartJobRequest* request);

// An ad hoc job `name` running argv `command` (never through a shell) in
// `working_dir` (tpuctl passes its own current directory).
tpud::v1::StartJobRequest AdHocStartRequest(const std::string& name,
                                            const std::vector<std::string>& command,
                                            const std::string& working_dir);

// Commands. Each returns Result::Ok() after printing its output, or the
// failure mapped by ResultFromStatus (nothing printed on stdout then).

// StartJob; prints FormatJobLine of the resulting status.
Result StartJob(const Session& session, const tpud::v1::StartJobRequest& request);
// StopJob / RestartJob; print FormatJobLine of the resulting status. With
// `wait`, StopJob then follows the stop ladder (GetJob every
// kProgressPollInterval, each rung on stderr through ProgressLine) until the
// job is no longer stopping, and prints its final line; Ctrl-C stops the
// waiting, not the stop.
Result StopJob(const Session& session, const std::string& name, bool wait = false);
Result RestartJob(const Session& session, const std::string& name);
// RemoveJob; prints "removed NAME ...".
Result RemoveJob(const Session& session, const std::string& name);

// Without a name: ListJobs as FormatStatusTable, or JobsJson with `json`.
// With a name: GetJob as FormatJobDetail, or JobJson with `json`.
Result ShowStatus(const Session& session, const std::optional<std::string>& name, bool json);

// TailLogs: writes each chunk's bytes to `out` as it arrives (flushing), and
// a note to `err` for dropped_bytes > 0. `lines` < 0 asks for the daemon's
// default. With `follow`, runs until the daemon ends the stream or SIGINT
// (which returns Ok); without, the stream is bounded by `timeout`.
Result TailLogs(const Session& session, const std::string& job, int lines, bool follow);

// What `tpuctl events` asks the daemon for and which of its items it prints.
struct EventsQuery {
  std::string job;              // Empty: all jobs.
  int history = 0;              // Past items first (0: all the daemon kept).
  bool follow = false;          // As for TailLogs.
  bool json = false;            // JSON lines instead of text lines.
  bool incidents_only = false;  // Skip state changes (filtered here, so `history`
                                // counts both kinds).
};

// WatchEvents: one line per item as it arrives, FormatEventLine for a state
// change and FormatIncidentLine for an incident update (EventJson /
// IncidentJson with `json`). Items of a kind this client does not know are
// skipped.
Result WatchEvents(const Session& session, const EventsQuery& query);

// GetDaemonInfo as FormatDaemonInfo, or DaemonInfoJson with `json`.
Result ShowDaemonInfo(const Session& session, bool json);

}  // namespace tpud::client
