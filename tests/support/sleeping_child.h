// A child process that sleeps until the test ends: a live process for code
// that inspects processes (/proc, stacks).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <stdexcept>

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

 private:
  pid_t pid_ = -1;
};

}  // namespace tpud::testing
