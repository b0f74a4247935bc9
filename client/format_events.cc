// The lines and JSON records of `tpuctl events`: state changes and incidents.
#include <cstdio>

#include "client/format.h"
#include "client/format_internal.h"

namespace tpud::client {
namespace {

using internal::Dump;
using internal::ExitWords;
using internal::Json;
using tpud::v1::Incident;
using tpud::v1::JobEvent;

// How much of the matched line an event line quotes, and of the outcome
// ("gave up: ..." repeats the reason of the transition next to it).
constexpr std::size_t kEventLineChars = 100;
constexpr std::size_t kEventOutcomeChars = 60;

// " step=1234 resumed=1200 lost=34", each part only when known.
std::string StepWords(const Incident& incident) {
  std::string words;
  if (incident.step_reached() >= 0) words += " step=" + std::to_string(incident.step_reached());
  if (incident.checkpoint_step() >= 0) {
    words += " resumed=" + std::to_string(incident.checkpoint_step());
  }
  if (incident.steps_lost() >= 0) words += " lost=" + std::to_string(incident.steps_lost());
  return words;
}

// " open: restarting in 5s" while open; " downtime=12.3s restarted" once closed.
std::string OutcomeWords(const Incident& incident) {
  const std::string outcome = FormatMatchedLine(incident.outcome(), kEventOutcomeChars);
  if (incident.open()) return outcome.empty() ? " open" : " open: " + outcome;
  std::string words = " downtime=" + FormatDowntime(incident.downtime_seconds());
  if (!outcome.empty()) words += " " + outcome;
  return words;
}

}  // namespace

std::string FormatEventLine(const JobEvent& event) {
  std::string line = FormatUtcTime(event.time_unix_ms()) + " " + event.job() + " " +
                     StateName(event.from()) + " -> " + StateName(event.to()) +
                     " attempt=" + std::to_string(event.attempt());
  if (event.has_worker()) line += " worker=" + std::to_string(event.worker());
  if (event.checkpoint().found() && event.checkpoint().step() >= 0) {
    line += " step=" + std::to_string(event.checkpoint().step());
  }
  line += ExitWords(event.exit());
  if (!event.reason().empty()) line += " " + event.reason();
  return line;
}

std::string EventJson(const JobEvent& event) {
  const Json out = {
      {"type", "transition"},
      {"sequence", event.sequence()},
      {"time", FormatUtcTime(event.time_unix_ms())},
      {"time_unix_ms", event.time_unix_ms()},
      {"job", event.job()},
      {"from", StateName(event.from())},
      {"to", StateName(event.to())},
      {"attempt", event.attempt()},
      {"worker", event.has_worker() ? Json(event.worker()) : Json(nullptr)},
      {"reason", event.reason()},
      {"exit", event.exit().exited() ? internal::ExitJson(event.exit()) : Json(nullptr)},
      {"checkpoint",
       event.has_checkpoint() ? internal::CheckpointJson(event.checkpoint()) : Json(nullptr)}};
  return Dump(out);
}

std::string FormatIncidentLine(const Incident& incident) {
  const tpud::v1::Failure& failure = incident.failure();
  std::string line = FormatUtcTime(incident.time_unix_ms()) + " " + incident.job() +
                     " INCIDENT #" + std::to_string(incident.id()) +
                     " attempt=" + std::to_string(incident.attempt()) +
                     " class=" + internal::OrNone(failure.failure_class()) +
                     " action=" + internal::OrNone(failure.action());
  line += ExitWords(incident.exit()) + StepWords(incident);
  if (!incident.reset_backend().empty()) {
    line += " reset=" + incident.reset_backend() + ":" + FormatDowntime(incident.reset_duration_seconds()) +
            (incident.reset_result() == "ok" ? ":ok" : ":failed");
  }
  line += OutcomeWords(incident);
  const std::string matched = FormatMatchedLine(failure.matched_line(), kEventLineChars);
  if (!matched.empty()) line += " \"" + matched + "\"";
  return line;
}

std::string IncidentJson(const Incident& incident) {
  Json out = {{"type", "incident"}};
  out.update(internal::IncidentObject(incident));
  return Dump(out);
}

}  // namespace tpud::client
