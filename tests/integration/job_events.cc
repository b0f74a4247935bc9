#include "tests/integration/job_events.h"

namespace tpud::testing {

using json = nlohmann::json;

json LatestIncident(const std::vector<json>& events, std::int64_t id) {
  json latest;
  for (const json& event : events) {
    if (event.value("type", "") == "incident" && event.value("id", std::int64_t{-1}) == id) {
      latest = event;
    }
  }
  return latest;
}

json FindTransition(const std::vector<json>& events, const std::string& to, const std::string& words) {
  for (const json& event : events) {
    if (event.value("type", "") != "transition" || event.value("to", "") != to) continue;
    if (event.value("reason", "").find(words) != std::string::npos) return event;
  }
  return json();
}

int CountTransitions(const std::vector<json>& events, const std::string& to) {
  int count = 0;
  for (const json& event : events) {
    if (event.value("type", "") == "transition" && event.value("to", "") == to) ++count;
  }
  return count;
}

json WaitForClosedIncident(const TpudProcess& tpud, const std::string& job, std::int64_t id,
                           Seconds timeout) {
  json incident;
  WaitFor(
      [&] {
        incident = LatestIncident(tpud.Events(job), id);
        return !incident.is_null() && incident["open"] == false;
      },
      timeout);
  return incident;
}

std::string ShellJob(const std::string& name, const std::string& script,
                     const std::string& extra_keys) {
  return "- name: " + name + "\n" +
         "  command: [/bin/sh, -c, " + YamlQuote(script) + "]\n" +
         "  start_seconds: 0.2\n" + extra_keys;
}

}  // namespace tpud::testing
