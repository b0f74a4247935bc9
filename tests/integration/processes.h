// What is left of a job's processes, seen through /proc and kill(2).
//
// The test process makes itself a child subreaper (BecomeSubreaper), so job
// processes that outlive their parent are reparented to it, and reaps those
// orphans before answering whether a process or group is gone, as init would
// reap them on a real host. (The container these tests run in has a PID 1
// that never reaps, and a zombie still counts as a member of its process
// group for kill(2).) Children the test waits for itself (tpud) are
// registered with KeepChild and never reaped here.
//
// Thread-safety: none; use from the test's thread only.
#pragma once

#include <string>

namespace tpud::testing {

// prctl(PR_SET_CHILD_SUBREAPER); idempotent.
void BecomeSubreaper();

// Excludes the child `pid` from ReapOrphans/KillOrphans until ReleaseChild(pid).
void KeepChild(int pid);
void ReleaseChild(int pid);

// Reaps zombie children of this process that were not kept.
void ReapOrphans();
// SIGKILLs the process group of each child that was not kept (unless it is
// ours) and waits, up to 5 s, until they are reaped.
void KillOrphans();

// True when no process is in group `pgid`: kill(-pgid, 0) fails with ESRCH.
// Reaps orphans first.
bool ProcessGroupGone(int pgid);
// True when `pid` no longer exists; reaps orphans first.
bool ProcessGone(int pid);
// "PID STATE COMM; " for each process still in `pgid`, for failure messages.
std::string DescribeProcessGroup(int pgid);

}  // namespace tpud::testing
