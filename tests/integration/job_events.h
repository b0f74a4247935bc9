// Helpers over what `tpuctl events JOB --json` prints (TpudProcess::Events):
// transition records ("type": "transition") and incident records ("type":
// "incident"; one record each time the incident changes, so the newest record
// of an id is its current state). Also a builder for shell-script job specs.
//
// Thread-safety: none needed; pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/harness.h"

namespace tpud::testing {

// The newest record of incident `id` among `events`; null when there is none.
nlohmann::json LatestIncident(const std::vector<nlohmann::json>& events, std::int64_t id);

// The first transition into state `to` whose reason contains `words`; null
// when there is none.
nlohmann::json FindTransition(const std::vector<nlohmann::json>& events, const std::string& to,
                              const std::string& words = "");

// How many transitions go into state `to`.
int CountTransitions(const std::vector<nlohmann::json>& events, const std::string& to);

// Polls `tpuctl events JOB --json` until incident `id` is closed ("open":
// false) or `timeout` passes; returns its newest record (null when never seen).
nlohmann::json WaitForClosedIncident(const TpudProcess& tpud, const std::string& job,
                                     std::int64_t id, Seconds timeout = Seconds(10));

// One item of a `jobs:` block sequence: NAME running `/bin/sh -c SCRIPT`, up
// after 0.2 s, with `extra_keys` (each line "  key: value", indented by two
// spaces) appended.
std::string ShellJob(const std::string& name, const std::string& script,
                     const std::string& extra_keys = "");

}  // namespace tpud::testing
