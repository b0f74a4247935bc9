// A child process that sleeps until the test ends: a live process for code
// that inspects processes (/proc, stacks).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>

#include "daemon/process/process_tree.h"

extern char** environ;

namespace tpud::testing {

// Thread-safety: one owner.
class SleepingChild {
 public:
  // Starts /bin/sleep 600. Throws std::runtime_error when it cannot.
  SleepingChild() {
    char sleep[] = "/bin/sleep";
    char seconds[] = "600";
    char* argv[] = {sleep, seconds, nullptr};
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv, environ) != 0) {
      throw std::runtime_error("posix_spawn /bin/sleep");
    }
  }
  // SIGKILL and reap.
  ~SleepingChild() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  SleepingChild(const SleepingChild&) = delete;
  SleepingChild& operator=(const SleepingChild&) = delete;

  pid_t pid() const { return pid_; }

  // Waits (up to 10 s) until the child sleeps interruptibly (state S in
  // /proc/PID/stat). Just after the spawn it may still be in D for a moment
  // (exec paging in under load), which code that spares D processes sees.
  // False when it never got there.
  bool WaitAsleep() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      const std::optional<ProcStat> stat = ReadProcStat(pid_);
      if (stat && stat->state == 'S') return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace tpud::testing
