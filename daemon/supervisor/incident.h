// An incident: one failed attempt and the recovery that followed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/core/failure_rule.h"
#include "daemon/core/clock.h"
#include "daemon/core/exit_status.h"

namespace tpud {

struct Incident {
  std::int64_t id = 0;        // Per job, from 1.
  std::string job;
  int attempt = 0;            // The attempt that failed.
  WallTime started;           // When tpud saw the failure (exit, or hang deadline).
  Classification failure;     // Class, action, hint, and the line that decided it.
  ExitStatus exit;
  bool counted = true;        // Whether it used the restart budget (preemptions do not).
  std::optional<std::int64_t> step_reached;     // Last step the attempt reported (progress regex).
  std::optional<std::int64_t> checkpoint_step;  // Step the next attempt resumed from.
  std::optional<Seconds> downtime;              // Failure -> next attempt running; unset while open.
  std::string outcome;        // "restarted", "gave up: ...", "stopped", "waiting for maintenance".
  bool open = true;
  // The TPU reset made for it, if any (tpu.reset.backend).
  std::string reset_backend;                    // "api", "gcloud", "local"; empty: none.
  std::optional<Seconds> reset_duration;
  std::string reset_result;                     // "ok", or the reset's error.
  std::int64_t store_id = 0;                    // Its id in the state store; 0: not stored yet.

  // step_reached - checkpoint_step when both are known (steps redone after the restart).
  std::optional<std::int64_t> steps_lost() const {
    if (!step_reached || !checkpoint_step) return std::nullopt;
    return *step_reached - *checkpoint_step;
  }
};

}  // namespace tpud
