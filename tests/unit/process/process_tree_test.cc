// Reading processes from /proc, and the small helpers for durations and
// echoed values that keep bad input from doing harm.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "daemon/core/durations.h"
#include "daemon/core/text.h"
#include "daemon/process/process_tree.h"

namespace tpud {
namespace {

TEST_CASE("ParseProcStat: reads state, ppid, pgrp and start time past a name with spaces and parens", "[process]") {
  const std::optional<ProcStat> stat = ParseProcStat(
      "4242 (python3 (worker) x) S 17 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3\n");
  REQUIRE(stat.has_value());
  CHECK(stat->pid == 4242);
  CHECK(stat->state == 'S');
  CHECK(stat->ppid == 17);
  CHECK(stat->pgrp == 4242);
  CHECK(stat->start_ticks == 987654);
  CHECK_FALSE(ParseProcStat("4242 (x) S 17").has_value());
  CHECK_FALSE(ParseProcStat("garbage").has_value());
}

TEST_CASE("Process identity: a process is itself until it is gone, and a pid with another start time is not it",
          "[process]") {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  REQUIRE(child > 0);
  const std::optional<ProcessIdentity> who = IdentifyProcess(child);
  REQUIRE(who.has_value());
  CHECK(IsSameProcess(*who));
  CHECK_FALSE(IsSameProcess({child, who->start_ticks + 1}));  // What a reused pid looks like.
  CHECK_FALSE(AttemptProcessesGone(*who));
  CHECK(KillAttemptProcesses(*who) >= 1);
  ::waitpid(child, nullptr, 0);
  CHECK_FALSE(IsSameProcess(*who));
  CHECK(AttemptProcessesGone(*who));
}

TEST_CASE("ChildPids lists this process's children", "[process]") {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::vector<int> children = ChildPids(::getpid());
  CHECK(std::find(children.begin(), children.end(), child) != children.end());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST_CASE("Durations: huge and odd values are bounded in config and saturate when converted", "[durations]") {
  CHECK(CheckDurationSeconds("stop.grace_seconds", 30).ok());
  CHECK(std::string(CheckDurationSeconds("stop.grace_seconds", 1e10).message()) ==
        "stop.grace_seconds: must be at most 2592000 (30 days), got 1e+10");
  CHECK(std::string(CheckDurationSeconds("k", -1).message()) == "k: must be >= 0, got -1");
  CHECK(std::string(CheckDurationSeconds("k", 0, /*positive=*/true).message()) == "k: must be > 0, got 0");
  CHECK_FALSE(CheckDurationSeconds("k", std::nan("")).ok());
  CHECK(ToNanos(1.5) == std::chrono::milliseconds(1500));
  CHECK(ToNanos(1e10) > std::chrono::hours(24 * 365 * 200));  // Not wrapped to 4 ms.
  CHECK(ToNanos(1e300) == ToNanos(1e20));
  CHECK(ToNanos(-5) == std::chrono::nanoseconds(0));
  CHECK(ToNanos(std::nan("")) == std::chrono::nanoseconds(0));
}

TEST_CASE("Truncated: long values are cut at a UTF-8 boundary with their size", "[text]") {
  CHECK(Truncated("short") == "short");
  const std::string name(10'000'000, 'a');
  const std::string echoed = Truncated(name);
  CHECK(echoed.size() < 300);
  CHECK(echoed.find("(10000000 bytes)") != std::string::npos);
  const std::string euros = std::string(199, 'x') + "\xe2\x82\xac\xe2\x82\xac";  // A 3-byte char spans byte 200.
  CHECK(Truncated(euros).substr(0, 200) == std::string(199, 'x') + ".");
}

}  // namespace
}  // namespace tpud
