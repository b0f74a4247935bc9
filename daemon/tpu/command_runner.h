// Runs a short command to completion and captures its output: how the gcloud
// backend calls `gcloud`. Not for jobs (daemon/launch does those).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/exit_status.h"
#include "daemon/tpu/wait_clock.h"

namespace tpud {

struct CommandResult {
  ExitStatus status;        // How it ended (launcher.h).
  std::string stdout_text;  // Each stream truncated to max_output_bytes.
  std::string stderr_text;
};

struct CommandOptions {
  std::chrono::milliseconds timeout{600'000};  // Real time (steady clock).
  std::size_t max_output_bytes = 1 << 20;
  CancelToken* cancel = nullptr;  // Optional, not owned.
};

// Runs `argv` (never through a shell; argv[0] without '/' is looked up in
// PATH) with stdin from /dev/null, in a new process group, with the daemon's
// environment, default signal dispositions and an empty signal mask. Returns
// once it exits; a non-zero exit is a result, not an error. Errors, naming
// argv[0]: NotFound / PermissionDenied (cannot execute); DeadlineExceeded
// (`timeout` passed: the whole group got SIGKILL and was reaped); Cancelled
// (likewise, promptly after cancel); Internal (pipe, spawn, pidfd failures).
// Thread-safety: safe from any thread; reaps only the pid it spawned.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options);

}  // namespace tpud
