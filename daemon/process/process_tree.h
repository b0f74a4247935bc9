// What the kernel says about processes, read from /proc (proc(5)): a process's
// identity (pid plus start time, so a reused pid is never mistaken for the
// process it replaced), its process group and parent, and the sets of
// processes that make up an attempt. Shared by tpud (to signal and clean up
// attempts whose shim died) and tpud-shim (to end every descendant of its
// trainer).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpud {

// One line of /proc/PID/stat, the fields tpud uses.
struct ProcStat {
  int pid = 0;
  char state = '?';              // R, S, D, Z (zombie), ...
  int ppid = 0;
  int pgrp = 0;
  int session = 0;
  std::uint64_t start_ticks = 0;  // Field 22: clock ticks after boot the process started.
};

// Parses the text of /proc/PID/stat; nullopt when malformed. The command name
// (field 2) may hold spaces and parentheses: fields are read after the last ')'.
std::optional<ProcStat> ParseProcStat(const std::string& text);
// /proc/PID/stat of a live or zombie process; nullopt when there is none.
std::optional<ProcStat> ReadProcStat(int pid);

// A process as tpud remembers it: pid and start time. The kernel never gives
// a pid to two processes at once, and a process that reuses the pid starts
// later, so (pid, start_ticks) names one process for ever.
struct ProcessIdentity {
  int pid = 0;
  std::uint64_t start_ticks = 0;  // 0: unknown (an attempt started by an older tpud).
};

// The identity of `pid` now; nullopt when no such process exists.
std::optional<ProcessIdentity> IdentifyProcess(int pid);
// True while the process `who` exists (as a zombie too) and is the same one:
// its start time matches (or `who.start_ticks` is 0, unknown).
bool IsSameProcess(const ProcessIdentity& who);
// IsSameProcess, and not a zombie: it still runs. (A dead process whose
// parent never reaps it, e.g. under a container's PID 1, stays a zombie.)
bool IsRunning(const ProcessIdentity& who);

// The children of `pid` (a thread group leader), from
// /proc/PID/task/PID/children (CONFIG_PROC_CHILDREN): one read, no scan of
// /proc. Empty when the file is missing.
std::vector<int> ChildPids(int pid);
// Every process now in process group `pgid`.
std::vector<ProcStat> ProcessGroupMembers(int pgid);
// Every process now whose parent is `ppid`.
std::vector<ProcStat> ChildrenOf(int ppid);
// `root` and every process descended from it through parent links, as they
// are now (processes whose parent already died have been reparented and are
// not found here).
std::vector<ProcStat> ProcessTree(int root);

// SIGKILLs, once each, the processes of an attempt whose supervisor (its
// shim) is gone: the process `leader` and its descendants when it is still
// the same process, and the members of process group `leader.pid` that
// started no earlier than it (so a group that reused the number after the
// original emptied is spared). Returns how many processes it signalled.
int KillAttemptProcesses(const ProcessIdentity& leader);
// True when no process of the attempt is left: `leader` is gone (or a
// zombie) and no live member of its group remains. Zombies do not count: they
// hold nothing but their pid.
bool AttemptProcessesGone(const ProcessIdentity& leader);

}  // namespace tpud
