#include "tests/integration/adversity.h"

#include <grp.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <pwd.h>
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <stdexcept>

#include "tests/integration/processes.h"

namespace tpud::testing {
namespace fs = std::filesystem;

bool CanRunAsNobody() {
  if (::geteuid() != 0 || ::getpwnam("nobody") == nullptr || ::getgrnam("nogroup") == nullptr ||
      ::getgrnam("users") == nullptr || RunCommand({"sh", "-c", "command -v setpriv"}).exit_code != 0) {
    WARN("needs root, setpriv and the nobody/nogroup/users accounts: skipped");
    return false;
  }
  return true;
}

CommandResult TpuctlAsNobody(const TpudProcess& tpud, const std::string& groups,
                             const std::vector<std::string>& args, Seconds timeout) {
  std::vector<std::string> argv = {"setpriv", "--reuid=nobody", "--regid=nogroup"};
  argv.push_back(groups.empty() ? "--clear-groups" : "--groups=" + groups);
  argv.insert(argv.end(), {"--", TPUCTL_BIN, "--socket", tpud.socket().string()});
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

uid_t NobodyUid() { return ::getpwnam("nobody")->pw_uid; }

bool CanMountTmpfs() {
  if (::geteuid() != 0) {
    WARN("needs root to mount a tmpfs: skipped");
    return false;
  }
  TempDir probe;
  if (RunCommand({"mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe.path().string()}).exit_code != 0) {
    WARN("mount -t tmpfs fails here: skipped");
    return false;
  }
  RunCommand({"umount", "-l", probe.path().string()});
  return true;
}

Tmpfs::Tmpfs(const fs::path& path, const std::string& options) : path_(path) {
  fs::create_directories(path);
  const CommandResult mounted = RunCommand({"mount", "-t", "tmpfs", "-o", options, "tmpfs", path.string()});
  if (mounted.exit_code != 0) throw std::runtime_error("mount tmpfs at " + path.string() + ": " + mounted.err);
}

Tmpfs::~Tmpfs() { RunCommand({"umount", "-l", path_.string()}); }

void Tmpfs::Fill(const std::string& name, bool inodes) {
  // One big file takes the blocks; with `inodes`, small files take the rest.
  RunCommand({"sh", "-c", "dd if=/dev/zero of='" + (path_ / name).string() + "' bs=4k 2>/dev/null; true"});
  fillers_.push_back(path_ / name);
  for (int i = 0; inodes && i < 100000; ++i) {
    const fs::path file = path_ / (name + "." + std::to_string(i));
    std::ofstream out(file);
    if (!out) break;
    fillers_.push_back(file);
  }
}

void Tmpfs::Free() {
  for (const fs::path& file : fillers_) {
    std::error_code ec;
    fs::remove(file, ec);
  }
  fillers_.clear();
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return ctx;
}

std::unique_ptr<v1::Supervisor::Stub> StubFor(const TpudProcess& tpud) {
  return v1::Supervisor::NewStub(
      grpc::CreateChannel("unix:" + tpud.socket().string(), grpc::InsecureChannelCredentials()));
}

long ProcessUid(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

int PidFromFile(const fs::path& file) {
  std::ifstream in(file);
  int pid = -1;
  in >> pid;
  return in ? pid : -1;
}

bool Alive(int pid) {
  if (pid <= 0) return false;
  ReapOrphans();
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

}  // namespace tpud::testing
