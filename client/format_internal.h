// Helpers shared by the format*.cc files; not part of tpuctl's interface.
// Only those files include this header (and with it nlohmann/json).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpud/v1/tpud.pb.h"

namespace tpud::client::internal {

using Json = nlohmann::ordered_json;

// What every view prints for a missing value.
inline constexpr std::string_view kNone = "-";

// `text`, or kNone when it is empty.
std::string OrNone(const std::string& text);

// Rows as aligned columns, two spaces apart (the last column unpadded), one
// line each, trailing spaces trimmed.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

// Compact JSON text of `value`; invalid UTF-8 in protobuf strings is replaced
// by U+FFFD instead of throwing.
std::string Dump(const Json& value);

// The "last_exit" shape of JobJson (see client/format.h).
Json ExitJson(const tpud::v1::ExitInfo& exit);

// The exit's description from the daemon ("exit code 3", "killed by
// SIGKILL"), else FormatLastExit; kNone before the first exit.
std::string DescribeExit(const tpud::v1::ExitInfo& exit);

// The time as FormatUtcTime, or null when `unix_ms` is not positive.
Json TimeJson(std::int64_t unix_ms);

// The "checkpoint" shape of JobJson: {"path": str|null, "step": int|null}.
Json CheckpointJson(const tpud::v1::Checkpoint& checkpoint);

// `value` when it is >= 0, else null (the API sends -1 for "unknown").
Json KnownOrNull(std::int64_t value);

// Appends "key:" padded to the value column (13), the value and a newline.
void AddField(std::string& out, std::string_view key, std::string_view value);

// " code=3", " signal=SIGKILL" (or " signal=77"), or "" when the attempt has
// not ended or never started (spawn failure): the exit part of event lines.
std::string ExitWords(const tpud::v1::ExitInfo& exit);

// A spawn failure ended no process: neither an exit code nor a signal.
bool IsSpawnFailure(const tpud::v1::ExitInfo& exit);

// The incident as the object shared by `status --json` ("last_failure") and
// `events --json` (see IncidentJson in client/format.h).
Json IncidentObject(const tpud::v1::Incident& incident);

// The incident's TPU reset for the "last failure:" block: "api in 12.3s, ok",
// "api in 0.2s, failed: <result>"; "" when none was made.
std::string ResetSummary(const tpud::v1::Incident& incident);

// failures_by_class as an object with its keys sorted: {"hbm_oom": 2, ...}.
Json FailuresByClassJson(const tpud::v1::JobStatus& job);

// The LAST-EXIT cell of the status table: FormatLastExit, prefixed with the
// failure class when the last incident is about that same exit:
// "hbm_oom (exit 1)".
std::string LastExitCell(const tpud::v1::JobStatus& job);

// "deadline_exceeded 2, hbm_oom 1": failures_by_class, most frequent first
// (ties by name); "" when there are none.
std::string FailureCounts(const tpud::v1::JobStatus& job);

// Appends the "last failure:" block of FormatJobDetail; nothing when the job
// has no incident.
void AddLastFailure(std::string& out, const tpud::v1::JobStatus& job);

// One line for a gang job's row in `tpuctl status`: "gang generation 2
// starting: 3 of 4 workers running, 1 lost" (client/format_slice.cc).
std::string GangSummary(const tpud::v1::GangStatus& gang);
// The "gang" object of a gang job's JSON (client/format_slice.cc).
Json GangJson(const tpud::v1::GangStatus& gang);

}  // namespace tpud::client::internal
