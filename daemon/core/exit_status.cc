#include "daemon/core/exit_status.h"

#include <sys/wait.h>

#include <array>
#include <cctype>
#include <csignal>
#include <string>
#include <utility>


namespace tpud {
namespace {

constexpr std::array<std::pair<int, const char*>, 31> kSignals = {{
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},     {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},     {SIGTERM, "SIGTERM"}, {SIGSTKFLT, "SIGSTKFLT"},
    {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
    {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"}, {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
    {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},
}};

}  // namespace

std::string SignalName(int signal) {
  for (const auto& [number, name] : kSignals) {
    if (number == signal) return name;
  }
  return "signal " + std::to_string(signal);
}

int SignalNumber(std::string_view name) {
  if (name.empty()) return -1;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) {
    int value = 0;
    for (char c : name) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || value > 1000) return -1;
      value = value * 10 + (c - '0');
    }
    return value >= 1 && value <= 64 ? value : -1;
  }
  std::string upper;
  for (char c : name) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (upper.rfind("SIG", 0) != 0) upper = "SIG" + upper;
  for (const auto& [number, signal_name] : kSignals) {
    if (upper == signal_name) return number;
  }
  return -1;
}

ExitStatus ExitStatusFromWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFEXITED(wait_status)) {
    status.code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
    status.core_dumped = WCOREDUMP(wait_status);
  }
  return status;
}

std::string ExitStatus::Describe() const {
  if (!spawn_error.empty()) return "spawn failed: " + spawn_error;
  if (signal != 0) {
    return "killed by " + SignalName(signal) + (core_dumped ? " (core dumped)" : "");
  }
  return "exit code " + std::to_string(code);
}

}  // namespace tpud
