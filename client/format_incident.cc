// How a job's failures read in `tpuctl status`: the "last failure:" block,
// the class folded into LAST-EXIT, and the incident object of the JSON views.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "client/format.h"
#include "client/format_internal.h"

namespace tpud::client {
namespace {

using internal::AddField;
using internal::Json;
using internal::kNone;
using internal::OrNone;
using tpud::v1::Incident;
using tpud::v1::JobStatus;

// How much of the matched line the detail view quotes: with the 13-column
// key and the quotes, a line fits in 120 columns.
constexpr std::size_t kDetailLineChars = 100;

bool IsContinuationByte(unsigned char c) { return (c & 0xC0) == 0x80; }

// The index of the last byte of the escape sequence starting at `esc`: the
// final byte (0x40-0x7E) of a CSI sequence "ESC [ ...", else the ESC itself.
std::size_t EscapeEnd(std::string_view text, std::size_t esc) {
  if (esc + 1 >= text.size() || text[esc + 1] != '[') return esc;
  std::size_t i = esc + 2;
  while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7E)) ++i;
  return std::min(i, text.size() - 1);
}

// Without escape sequences, control characters as spaces, trimmed.
std::string Printable(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0x1B) {
      i = EscapeEnd(text, i);
    } else {
      out += (c < 0x20 || c == 0x7F) ? ' ' : text[i];
    }
  }
  const std::size_t first = out.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

// The byte offset where code point number `n` (from 0) starts; size() if none.
std::size_t CodePointOffset(const std::string& text, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (IsContinuationByte(static_cast<unsigned char>(text[i]))) continue;
    if (seen++ == n) return i;
  }
  return text.size();
}

// The attempt whose end last_exit reports: the one before the live attempt
// while there is one, else the last attempt.
int LastExitAttempt(const JobStatus& job) {
  const tpud::v1::JobState state = job.state();
  const bool live = state == tpud::v1::JOB_STATE_STARTING ||
                    state == tpud::v1::JOB_STATE_RUNNING || state == tpud::v1::JOB_STATE_STOPPING;
  return live ? job.attempt() - 1 : job.attempt();
}

std::string StepOrNone(std::int64_t step) {
  return step >= 0 ? std::to_string(step) : std::string(kNone);
}

// "reached 1234, resumed from 1200 (34 steps lost)"; "-" for what is unknown.
std::string DetailSteps(const Incident& incident) {
  std::string text = "reached " + StepOrNone(incident.step_reached()) + ", resumed from " +
                     StepOrNone(incident.checkpoint_step());
  const std::int64_t lost = incident.steps_lost();
  if (lost >= 0) text += " (" + std::to_string(lost) + (lost == 1 ? " step" : " steps") + " lost)";
  return text;
}

std::string DetailDowntime(const Incident& incident) {
  if (!incident.open()) return FormatDowntime(incident.downtime_seconds());
  if (incident.downtime_seconds() > 0) {
    return FormatDowntime(incident.downtime_seconds()) + " so far (still open)";
  }
  return "- (still open)";
}

std::string DetailMatchedLine(const std::string& line, const std::string& rule) {
  if (line.empty() && rule == "hang") return "- (no progress before the hang deadline)";
  if (line.empty()) return "- (decided by the exit status)";
  return "\"" + FormatMatchedLine(line, kDetailLineChars) + "\"";
}

// An indented "key: value" line of the "last failure:" block; values line up
// with the top-level ones.
void AddSubField(std::string& out, std::string_view key, std::string_view value) {
  AddField(out, "  " + std::string(key), value);
}

}  // namespace

std::string FormatDowntime(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "0.0s";
  const long long tenths = std::llround(std::min(seconds, 1e15) * 10);
  if (tenths >= 600) return FormatUptime(std::max(seconds, 60.0));  // 59.96 -> "1m00s".
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%lld.%llds", tenths / 10, tenths % 10);
  return buffer;
}

std::string FormatMatchedLine(std::string_view line, std::size_t max_chars) {
  constexpr std::string_view kEllipsis = "...";
  std::string text = Printable(line);
  max_chars = std::max(max_chars, kEllipsis.size() + 1);
  if (CodePointOffset(text, max_chars) == text.size()) return text;
  text.resize(CodePointOffset(text, max_chars - kEllipsis.size()));
  text.erase(text.find_last_not_of(' ') + 1);
  return text + std::string(kEllipsis);
}

namespace internal {

Json IncidentObject(const Incident& incident) {
  const tpud::v1::Failure& failure = incident.failure();
  return {{"id", incident.id()},
          {"time", TimeJson(incident.time_unix_ms())},
          {"time_unix_ms", incident.time_unix_ms()},
          {"job", incident.job()},
          {"attempt", incident.attempt()},
          {"class", failure.failure_class()},
          {"action", failure.action()},
          {"hint", failure.hint()},
          {"matched_line", failure.matched_line()},
          {"rule", failure.rule()},
          {"exit", incident.exit().exited() ? ExitJson(incident.exit()) : Json(nullptr)},
          {"counted", incident.counted()},
          {"step_reached", KnownOrNull(incident.step_reached())},
          {"checkpoint_step", KnownOrNull(incident.checkpoint_step())},
          {"steps_lost", KnownOrNull(incident.steps_lost())},
          {"downtime_seconds", incident.downtime_seconds()},
          {"open", incident.open()},
          {"outcome", incident.outcome()},
          {"reset_backend", incident.reset_backend().empty() ? Json(nullptr) : Json(incident.reset_backend())},
          {"reset_duration_seconds",
           incident.reset_backend().empty() ? Json(nullptr) : Json(incident.reset_duration_seconds())},
          {"reset_result", incident.reset_backend().empty() ? Json(nullptr) : Json(incident.reset_result())}};
}

std::string ResetSummary(const Incident& incident) {
  if (incident.reset_backend().empty()) return "";
  const std::string& result = incident.reset_result();
  return incident.reset_backend() + " in " + FormatDowntime(incident.reset_duration_seconds()) +
         (result == "ok" ? ", ok" : ", failed: " + FormatMatchedLine(result, kDetailLineChars));
}

Json FailuresByClassJson(const JobStatus& job) {
  std::vector<std::pair<std::string, std::int64_t>> counts(job.failures_by_class().begin(),
                                                            job.failures_by_class().end());
  std::sort(counts.begin(), counts.end());
  Json out = Json::object();
  for (const auto& [failure_class, count] : counts) out[failure_class] = count;
  return out;
}

std::string LastExitCell(const JobStatus& job) {
  const std::string exit = FormatLastExit(job.last_exit());
  const Incident& incident = job.last_incident();
  const std::string& failure_class = incident.failure().failure_class();
  if (!job.has_last_incident() || failure_class.empty() || !job.last_exit().exited() ||
      incident.attempt() != LastExitAttempt(job)) {
    return exit;
  }
  return failure_class + " (" + exit + ")";
}

std::string FailureCounts(const JobStatus& job) {
  std::vector<std::pair<std::string, std::int64_t>> counts(job.failures_by_class().begin(),
                                                            job.failures_by_class().end());
  std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string text;
  for (const auto& [failure_class, count] : counts) {
    if (!text.empty()) text += ", ";
    text += failure_class + " " + std::to_string(count);
  }
  return text;
}

void AddLastFailure(std::string& out, const JobStatus& job) {
  if (!job.has_last_incident()) return;
  const Incident& incident = job.last_incident();
  const tpud::v1::Failure& failure = incident.failure();
  out += "last failure:\n";
  AddSubField(out, "incident",
              "#" + std::to_string(incident.id()) + " (attempt " +
                  std::to_string(incident.attempt()) + ") at " +
                  FormatUtcTime(incident.time_unix_ms()));
  AddSubField(out, "class", OrNone(failure.failure_class()));
  AddSubField(out, "action", OrNone(failure.action()));
  AddSubField(out, "hint", OrNone(failure.hint()));
  AddSubField(out, "line", DetailMatchedLine(failure.matched_line(), failure.rule()));
  AddSubField(out, "rule", OrNone(failure.rule()));
  AddSubField(out, "exit", DescribeExit(incident.exit()));
  AddSubField(out, "steps", DetailSteps(incident));
  AddSubField(out, "downtime", DetailDowntime(incident));
  AddSubField(out, "outcome", OrNone(incident.outcome()));
  if (!incident.reset_backend().empty()) AddSubField(out, "tpu reset", ResetSummary(incident));
  AddSubField(out, "counted",
              incident.counted() ? "yes, against max_restarts" : "no, max_restarts untouched");
}

}  // namespace internal
}  // namespace tpud::client
