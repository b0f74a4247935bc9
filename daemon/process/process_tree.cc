#include "daemon/process/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include <cstdlib>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace tpud {
namespace {

// Calls fn(stat) for every process in /proc.
template <typename Fn>
void ForEachProcess(Fn&& fn) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return;
  while (const dirent* entry = ::readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid <= 0) continue;
    if (std::optional<ProcStat> stat = ReadProcStat(pid)) fn(*stat);
  }
  ::closedir(proc);
}

bool Live(const ProcStat& stat) { return stat.state != 'Z' && stat.state != 'X'; }

// The leader is gone and another process with its pid leads a group of its
// own: group `leader.pid` is that process's now, not the attempt's.
bool GroupNumberReused(const ProcessIdentity& leader) {
  if (IsSameProcess(leader)) return false;
  const std::optional<ProcStat> now = ReadProcStat(leader.pid);
  return now && now->pgrp == now->pid;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(const std::string& text) {
  const std::size_t open = text.find('(');
  const std::size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat stat;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.substr(0, open)), &stat.pid)) return std::nullopt;
  // Fields 3.. after the name: state ppid pgrp session tty_nr tpgid flags minflt
  // cminflt majflt cmajflt utime stime cutime cstime priority nice num_threads
  // itrealvalue starttime (field 22 is index 19 here).
  const std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  if (fields.size() < 20 || fields[0].size() != 1) return std::nullopt;
  stat.state = fields[0][0];
  if (!absl::SimpleAtoi(fields[1], &stat.ppid) || !absl::SimpleAtoi(fields[2], &stat.pgrp) ||
      !absl::SimpleAtoi(fields[3], &stat.session) || !absl::SimpleAtoi(fields[19], &stat.start_ticks)) {
    return std::nullopt;
  }
  return stat;
}

std::optional<ProcStat> ReadProcStat(int pid) {
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[1024];  // The fields tpud reads end well before 1 KiB.
  const ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  return ParseProcStat(std::string(buffer, static_cast<std::size_t>(n)));
}

std::vector<int> ChildPids(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
  std::vector<int> pids;
  std::ifstream in(path);
  for (int child = 0; in >> child;) pids.push_back(child);
  return pids;
}

std::optional<ProcessIdentity> IdentifyProcess(int pid) {
  const std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return std::nullopt;
  return ProcessIdentity{pid, stat->start_ticks};
}

bool IsSameProcess(const ProcessIdentity& who) {
  if (who.pid <= 0) return false;
  const std::optional<ProcStat> stat = ReadProcStat(who.pid);
  return stat && (who.start_ticks == 0 || stat->start_ticks == who.start_ticks);
}

bool IsRunning(const ProcessIdentity& who) {
  if (who.pid <= 0) return false;
  const std::optional<ProcStat> stat = ReadProcStat(who.pid);
  return stat && (who.start_ticks == 0 || stat->start_ticks == who.start_ticks) && Live(*stat);
}

std::vector<ProcStat> ProcessGroupMembers(int pgid) {
  std::vector<ProcStat> members;
  ForEachProcess([&](const ProcStat& stat) {
    if (stat.pgrp == pgid) members.push_back(stat);
  });
  return members;
}

std::vector<ProcStat> ChildrenOf(int ppid) {
  std::vector<ProcStat> children;
  ForEachProcess([&](const ProcStat& stat) {
    if (stat.ppid == ppid) children.push_back(stat);
  });
  return children;
}

std::vector<ProcStat> ProcessTree(int root) {
  std::vector<ProcStat> all;
  ForEachProcess([&](const ProcStat& stat) { all.push_back(stat); });
  std::vector<ProcStat> tree;
  for (const ProcStat& stat : all) {
    if (stat.pid == root) tree.push_back(stat);
  }
  for (std::size_t i = 0; i < tree.size(); ++i) {  // Breadth first; `tree` grows as we go.
    for (const ProcStat& stat : all) {
      if (stat.ppid == tree[i].pid && stat.pid != root) tree.push_back(stat);
    }
  }
  return tree;
}

int KillAttemptProcesses(const ProcessIdentity& leader) {
  int signalled = 0;
  std::vector<int> victims;
  if (IsSameProcess(leader)) {
    for (const ProcStat& stat : ProcessTree(leader.pid)) victims.push_back(stat.pid);
  }
  if (!GroupNumberReused(leader)) {
    for (const ProcStat& stat : ProcessGroupMembers(leader.pid)) {
      if (leader.start_ticks == 0 || stat.start_ticks >= leader.start_ticks) victims.push_back(stat.pid);
    }
  }
  for (int pid : victims) {
    if (::kill(pid, SIGKILL) == 0) ++signalled;
  }
  return signalled;
}

bool AttemptProcessesGone(const ProcessIdentity& leader) {
  if (IsSameProcess(leader)) {
    const std::optional<ProcStat> stat = ReadProcStat(leader.pid);
    if (stat && Live(*stat)) return false;
  }
  if (GroupNumberReused(leader)) return true;
  for (const ProcStat& stat : ProcessGroupMembers(leader.pid)) {
    if (Live(stat) && (leader.start_ticks == 0 || stat.start_ticks >= leader.start_ticks)) return false;
  }
  return true;
}

}  // namespace tpud
