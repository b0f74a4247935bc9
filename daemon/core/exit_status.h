// How an attempt ended, and signal names: vocabulary shared by the launchers,
// the shim, the classifier, the state store and the config (stop signals).
#pragma once

#include <string>
#include <string_view>

namespace tpud {

// How an attempt ended.
struct ExitStatus {
  int code = -1;             // Exit code; -1 when killed by a signal or never started.
  int signal = 0;            // Terminating signal; 0 when it exited.
  bool core_dumped = false;
  std::string spawn_error;   // Set when the process could not be started at all.

  bool succeeded() const { return spawn_error.empty() && signal == 0 && code == 0; }
  // "exit code 3", "killed by SIGKILL (core dumped)", "spawn failed: ...".
  std::string Describe() const;
  bool operator==(const ExitStatus&) const = default;
};

// Builds an ExitStatus from a waitpid()/waitid() status word.
ExitStatus ExitStatusFromWaitStatus(int wait_status);
// "SIGTERM" for 15; "signal 77" for an unknown number.
std::string SignalName(int signal);
// 15 for "SIGTERM", "TERM" or "15"; -1 when unknown.
int SignalNumber(std::string_view name);

}  // namespace tpud
