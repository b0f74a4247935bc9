#include "tests/integration/processes.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

namespace fs = std::filesystem;

std::set<int>& KeptChildren() {
  static std::set<int> pids;
  return pids;
}

struct ProcStat {
  int pid = 0;
  char state = '?';
  int ppid = 0;
  int pgrp = 0;
  std::string comm;
};

// Fields of /proc/PID/stat; nullopt when the process is gone.
std::optional<ProcStat> ReadProcStat(int pid) {
  const std::string text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  ProcStat stat;
  stat.pid = pid;
  stat.comm = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  rest >> stat.state >> stat.ppid >> stat.pgrp;
  if (!rest) return std::nullopt;
  return stat;
}

std::vector<ProcStat> AllProcesses() {
  std::vector<ProcStat> processes;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::optional<ProcStat> stat = ReadProcStat(std::stoi(name))) processes.push_back(*stat);
  }
  return processes;
}

// Children of this process that were not kept.
std::vector<ProcStat> Orphans() {
  std::vector<ProcStat> orphans;
  for (const ProcStat& process : AllProcesses()) {
    if (process.ppid == ::getpid() && KeptChildren().count(process.pid) == 0) {
      orphans.push_back(process);
    }
  }
  return orphans;
}

}  // namespace

void BecomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

void KeepChild(int pid) { KeptChildren().insert(pid); }

void ReleaseChild(int pid) { KeptChildren().erase(pid); }

void ReapOrphans() {
  for (const ProcStat& orphan : Orphans()) {
    if (orphan.state == 'Z') ::waitpid(orphan.pid, nullptr, WNOHANG);
  }
}

void KillOrphans() {
  for (const ProcStat& orphan : Orphans()) {
    if (orphan.pgrp != ::getpgrp()) ::kill(-orphan.pgrp, SIGKILL);
  }
  WaitFor([] { ReapOrphans(); return Orphans().empty(); }, Seconds(5));
}

bool ProcessGroupGone(int pgid) {
  ReapOrphans();
  return ::kill(-pgid, 0) == -1 && errno == ESRCH;
}

bool ProcessGone(int pid) {
  ReapOrphans();
  return ::kill(pid, 0) == -1 && errno == ESRCH;
}

std::string DescribeProcessGroup(int pgid) {
  std::string out;
  for (const ProcStat& process : AllProcesses()) {
    if (process.pgrp == pgid) {
      out += std::to_string(process.pid) + " " + process.state + " " + process.comm + "; ";
    }
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace tpud::testing
