#include "client/format.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string_view>

#include "client/format_internal.h"
#include "client/format_slice.h"

namespace tpud::client {

using tpud::v1::Checkpoint;
using tpud::v1::ExitInfo;
using tpud::v1::JobState;
using tpud::v1::JobStatus;

namespace internal {

std::string OrNone(const std::string& text) { return text.empty() ? std::string(kNone) : text; }

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size());
    for (std::size_t i = 0; i + 1 < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + '\n';
  }
  return out;
}

// Protobuf strings may hold any bytes; never let the JSON writer throw on
// invalid UTF-8 (it is replaced by U+FFFD).
std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool IsSpawnFailure(const ExitInfo& exit) { return exit.signal() == 0 && exit.code() < 0; }

Json ExitJson(const ExitInfo& exit) {
  const bool exited_normally = exit.exited() && exit.signal() == 0 && exit.code() >= 0;
  const bool signaled = exit.exited() && exit.signal() != 0;
  Json out = {{"exited", exit.exited()}, {"code", nullptr}, {"signal", nullptr},
              {"signal_name", nullptr}, {"description", exit.description()}};
  if (exited_normally) out["code"] = exit.code();
  if (signaled) {
    out["signal"] = exit.signal();
    out["signal_name"] = exit.signal_name();
  }
  return out;
}

Json TimeJson(std::int64_t unix_ms) {
  return unix_ms > 0 ? Json(FormatUtcTime(unix_ms)) : Json(nullptr);
}

std::string DescribeExit(const ExitInfo& exit) {
  if (!exit.exited()) return std::string(kNone);
  return exit.description().empty() ? FormatLastExit(exit) : exit.description();
}

Json CheckpointJson(const Checkpoint& checkpoint) {
  Json out = {{"path", nullptr}, {"step", nullptr}};
  if (checkpoint.found() && !checkpoint.path().empty()) out["path"] = checkpoint.path();
  if (checkpoint.found() && checkpoint.step() >= 0) out["step"] = checkpoint.step();
  return out;
}

Json KnownOrNull(std::int64_t value) { return value >= 0 ? Json(value) : Json(nullptr); }

void AddField(std::string& out, std::string_view key, std::string_view value) {
  constexpr std::size_t kKeyWidth = 13;
  std::string label = std::string(key) + ":";
  label.resize(std::max(kKeyWidth, label.size() + 1), ' ');
  out += label;
  out += value;
  out += '\n';
}

std::string ExitWords(const ExitInfo& exit) {
  if (!exit.exited()) return "";
  if (exit.signal() != 0) {
    return " signal=" +
           (exit.signal_name().empty() ? std::to_string(exit.signal()) : exit.signal_name());
  }
  return IsSpawnFailure(exit) ? "" : " code=" + std::to_string(exit.code());
}

}  // namespace internal

namespace {

using internal::AddField;
using internal::CheckpointJson;
using internal::Dump;
using internal::IsSpawnFailure;
using internal::Json;
using internal::kNone;
using internal::OrNone;

constexpr std::string_view kStatePrefix = "JOB_STATE_";

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  return joined;
}

bool HasUptime(JobState state) {
  return state == tpud::v1::JOB_STATE_STARTING || state == tpud::v1::JOB_STATE_RUNNING ||
         state == tpud::v1::JOB_STATE_STOPPING;
}

Json GoodputJson(const JobStatus& job) {
  if (!job.has_goodput()) return nullptr;
  Json badput = Json::object();
  for (const auto& [cause, seconds] : job.goodput().badput_seconds()) badput[cause] = seconds;
  return {{"ratio", job.goodput().ratio()},
          {"productive_seconds", job.goodput().productive_seconds()},
          {"badput_seconds", badput}};
}

// "92.5% of 1h02m (badput: startup 12.0s, recovery 25.0s)", causes in the
// order of daemon/supervisor/goodput.h, zero ones left out.
std::string DescribeGoodput(const tpud::v1::Goodput& goodput) {
  double wall = goodput.productive_seconds();
  for (const auto& [cause, seconds] : goodput.badput_seconds()) wall += seconds;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.1f%%", 100.0 * goodput.ratio());
  std::string out = std::string(ratio) + " of " + FormatUptime(wall);
  std::string badput;
  for (const char* cause : {"startup", "checkpoint_restore", "wasted_progress", "recovery", "hang_detection"}) {
    auto it = goodput.badput_seconds().find(cause);
    if (it == goodput.badput_seconds().end() || it->second <= 0) continue;
    badput += (badput.empty() ? "" : ", ") + std::string(cause) + " " + FormatDowntime(it->second);
  }
  return badput.empty() ? out : out + " (badput: " + badput + ")";
}

Json JobObject(const JobStatus& job) {
  using internal::TimeJson;
  return {{"name", job.name()},
          {"state", StateName(job.state())},
          {"pid", job.pid() != 0 ? Json(job.pid()) : Json(nullptr)},
          {"attempt", job.attempt()},
          {"restarts", job.restarts()},
          {"max_restarts", job.max_restarts()},
          {"last_exit", internal::ExitJson(job.last_exit())},
          {"checkpoint", CheckpointJson(job.checkpoint())},
          {"reason", job.reason()},
          {"uptime_seconds", job.uptime_seconds()},
          {"backoff_remaining_seconds", job.backoff_remaining_seconds()},
          {"command", Json(std::vector<std::string>(job.command().begin(), job.command().end()))},
          {"working_dir", job.working_dir()},
          {"origin", job.origin()},
          {"log_path", job.log_path()},
          {"state_since", TimeJson(job.state_since_unix_ms())},
          {"state_since_unix_ms", job.state_since_unix_ms()},
          {"last_step", internal::KnownOrNull(job.last_step())},
          {"failures_by_class", internal::FailuresByClassJson(job)},
          {"goodput", GoodputJson(job)},
          {"last_failure", job.has_last_incident() ? internal::IncidentObject(job.last_incident())
                                                   : Json(nullptr)},
          {"user", job.user()},
          {"group", job.group()},
          {"log_dropped_bytes", job.log_dropped_bytes()},
          {"log_dropping", job.log_dropping()},
          {"gang", job.has_gang() ? internal::GangJson(job.gang()) : Json(nullptr)},
          {"stop", job.has_stop() ? Json{{"intent", job.stop().intent()},
                                         {"rung", job.stop().rung()},
                                         {"rungs", job.stop().rungs()},
                                         {"signal", job.stop().signal()},
                                         {"next_signal", job.stop().next_signal()},
                                         {"next_in_seconds", job.stop().next_in_seconds()}}
                                  : Json(nullptr)}};
}

using Row = std::array<std::string, 10>;

Row TableRow(const JobStatus& job) {
  return {job.name(),
          StateName(job.state()),
          job.pid() != 0 ? std::to_string(job.pid()) : std::string(kNone),
          std::to_string(job.attempt()),
          std::to_string(job.restarts()) + "/" + std::to_string(job.max_restarts()),
          HasUptime(job.state()) ? FormatUptime(job.uptime_seconds()) : std::string(kNone),
          job.last_step() >= 0 ? std::to_string(job.last_step()) : std::string(kNone),
          FormatCheckpoint(job.checkpoint()),
          internal::LastExitCell(job),
          job.has_gang() ? "[" + internal::GangSummary(job.gang()) + "] " + job.reason() : job.reason()};
}

std::string DetailCheckpoint(const Checkpoint& checkpoint) {
  std::string text = FormatCheckpoint(checkpoint);
  if (checkpoint.found() && checkpoint.step() >= 0 && !checkpoint.path().empty()) {
    text += " (" + checkpoint.path() + ")";
  }
  return text;
}

std::string DetailState(const JobStatus& job) {
  std::string text = StateName(job.state());
  if (job.state_since_unix_ms() > 0) text += " since " + FormatUtcTime(job.state_since_unix_ms());
  return text;
}

}  // namespace

std::string StateName(JobState state) {
  if (state == tpud::v1::JOB_STATE_UNSPECIFIED || !tpud::v1::JobState_IsValid(state)) {
    return "unknown";
  }
  std::string name = tpud::v1::JobState_Name(state);
  if (name.rfind(kStatePrefix, 0) == 0) name.erase(0, kStatePrefix.size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

std::string FormatUptime(double seconds) {
  if (!std::isfinite(seconds) || seconds < 1) return "0s";
  const auto total = static_cast<std::int64_t>(std::min(seconds, 1e15));
  const std::int64_t days = total / 86400, hours = total / 3600 % 24;
  const std::int64_t minutes = total / 60 % 60, secs = total % 60;
  char buffer[48];
  if (days > 0) {
    std::snprintf(buffer, sizeof buffer, "%lldd%02lldh", static_cast<long long>(days),
                  static_cast<long long>(hours));
  } else if (hours > 0) {
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", static_cast<long long>(hours),
                  static_cast<long long>(minutes));
  } else if (minutes > 0) {
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(minutes),
                  static_cast<long long>(secs));
  } else {
    std::snprintf(buffer, sizeof buffer, "%llds", static_cast<long long>(secs));
  }
  return buffer;
}

std::string FormatUtcTime(std::int64_t unix_ms) {
  std::int64_t seconds = unix_ms / 1000, millis = unix_ms % 1000;
  if (millis < 0) {  // Round towards the past for times before 1970.
    millis += 1000;
    seconds -= 1;
  }
  const auto time = static_cast<std::time_t>(seconds);
  std::tm utc{};
  if (gmtime_r(&time, &utc) == nullptr) return "invalid-time";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return buffer;
}

std::string FormatCheckpoint(const Checkpoint& checkpoint) {
  if (!checkpoint.found()) return std::string(kNone);
  if (checkpoint.step() >= 0) return "step " + std::to_string(checkpoint.step());
  std::string name = std::filesystem::path(checkpoint.path()).filename().string();
  return name.empty() ? "found" : name;
}

std::string FormatLastExit(const ExitInfo& exit) {
  if (!exit.exited()) return std::string(kNone);
  if (exit.signal() != 0) {
    return exit.signal_name().empty() ? "signal " + std::to_string(exit.signal())
                                      : exit.signal_name();
  }
  if (IsSpawnFailure(exit)) return "spawn failed";
  return "exit " + std::to_string(exit.code());
}

std::string FormatStatusTable(const std::vector<JobStatus>& jobs) {
  std::vector<Row> rows = {{"NAME", "STATE", "PID", "ATTEMPT", "RESTARTS", "UPTIME", "STEP",
                            "CHECKPOINT", "LAST-EXIT", "REASON"}};
  for (const JobStatus& job : jobs) rows.push_back(TableRow(job));
  std::vector<std::vector<std::string>> table;
  for (const Row& row : rows) table.emplace_back(row.begin(), row.end());
  return internal::RenderTable(table);
}

std::string FormatJobDetail(const JobStatus& job) {
  std::string out;
  AddField(out, "name", job.name());
  AddField(out, "state", DetailState(job));
  AddField(out, "reason", OrNone(job.reason()));
  AddField(out, "pid", job.pid() != 0 ? std::to_string(job.pid()) : std::string(kNone));
  AddField(out, "attempt", std::to_string(job.attempt()));
  AddField(out, "restarts",
           std::to_string(job.restarts()) + " of " + std::to_string(job.max_restarts()));
  if (HasUptime(job.state())) AddField(out, "uptime", FormatUptime(job.uptime_seconds()));
  if (job.state() == tpud::v1::JOB_STATE_BACKOFF) {
    AddField(out, "next attempt", "in " + FormatUptime(job.backoff_remaining_seconds()));
  }
  if (job.last_step() >= 0) AddField(out, "step", std::to_string(job.last_step()));
  AddField(out, "checkpoint", DetailCheckpoint(job.checkpoint()));
  AddField(out, "last exit", internal::DescribeExit(job.last_exit()));
  if (job.failures_by_class_size() > 0) AddField(out, "failures", internal::FailureCounts(job));
  if (job.has_goodput()) AddField(out, "goodput", DescribeGoodput(job.goodput()));
  AddField(out, "command", OrNone(Join(job.command())));
  AddField(out, "working dir", OrNone(job.working_dir()));
  AddField(out, "origin", OrNone(job.origin()));
  if (!job.user().empty() || !job.group().empty()) {
    AddField(out, "runs as", (job.user().empty() ? "tpud's user" : job.user()) +
                                 (job.group().empty() ? "" : ":" + job.group()));
  }
  std::string log = OrNone(job.log_path());
  if (job.log_dropped_bytes() > 0) {
    log += " (" + std::to_string(job.log_dropped_bytes()) + " bytes of output lost" +
           (job.log_dropping() ? ", dropping now: disk full?" : "") + ")";
  }
  AddField(out, "log", log);
  internal::AddLastFailure(out, job);
  if (job.has_gang()) out += FormatGang(job.gang());
  return out;
}

std::string FormatStopRung(const tpud::v1::StopProgress& stop) {
  std::string text;
  if (stop.rung() > 0) {
    text = "sent " + stop.signal() + " (" + std::to_string(stop.rung()) + " of " + std::to_string(stop.rungs()) + ")";
  } else {
    text = "no signal sent yet";
  }
  if (!stop.next_signal().empty()) text += ", " + stop.next_signal() + " in " + FormatDowntime(stop.next_in_seconds());
  return text;
}

std::string FormatJobLine(const JobStatus& job) {
  std::string line = job.name() + ": " + StateName(job.state());
  if (job.pid() != 0) {
    line += " (pid " + std::to_string(job.pid()) + ", attempt " + std::to_string(job.attempt()) +
            ")";
  }
  if (!job.reason().empty()) line += " " + job.reason();
  if (job.has_stop()) line += "; " + FormatStopRung(job.stop());
  return line;
}

std::string JobJson(const JobStatus& job) { return Dump(JobObject(job)); }

std::string JobsJson(const std::vector<JobStatus>& jobs) {
  Json array = Json::array();
  for (const JobStatus& job : jobs) array.push_back(JobObject(job));
  return Dump(array);
}

std::string FormatDaemonInfo(const tpud::v1::GetDaemonInfoResponse& info,
                             const std::string& socket_path) {
  std::string out;
  AddField(out, "version", info.version());
  AddField(out, "pid", std::to_string(info.pid()));
  AddField(out, "started",
           info.start_time_unix_ms() > 0 ? FormatUtcTime(info.start_time_unix_ms())
                                         : std::string(kNone));
  AddField(out, "socket", socket_path);
  AddField(out, "metrics", OrNone(info.metrics_address()));
  AddField(out, "config", OrNone(info.config_path()));
  AddField(out, "cgroups", OrNone(info.attempt_cgroups()));
  std::string store = info.state_store_ok() ? "ok" : "FAILING: " + info.state_store_error();
  if (info.state_store_errors_total() > 0) {
    store += " (" + std::to_string(info.state_store_errors_total()) + " failed writes since start";
    if (info.state_store_ok()) store += "; last: " + info.state_store_error();
    store += ")";
  }
  AddField(out, "state store", store);
  return out;
}

std::string DaemonInfoJson(const tpud::v1::GetDaemonInfoResponse& info,
                           const std::string& socket_path) {
  Json out = {{"version", info.version()},
              {"pid", info.pid()},
              {"metrics_address", info.metrics_address()},
              {"config_path", info.config_path()},
              {"start_time", internal::TimeJson(info.start_time_unix_ms())},
              {"start_time_unix_ms", info.start_time_unix_ms()},
              {"socket", socket_path},
              {"attempt_cgroups", info.attempt_cgroups()},
              {"state_store_ok", info.state_store_ok()},
              {"state_store_error", info.state_store_error()},
              {"state_store_errors_total", info.state_store_errors_total()}};
  return Dump(out);
}

}  // namespace tpud::client
