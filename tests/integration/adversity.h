// What the adversarial tests need beyond the harness: other users, small or
// full filesystems, a direct gRPC client, and reading process facts.
// Thread-safety: none; use from the test's thread only.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/harness.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud::testing {

// Running as root with nobody, nogroup and users known and setpriv present;
// else WARNs that the test is skipped and returns false.
bool CanRunAsNobody();
// `tpuctl --socket SOCKET args...` as nobody (primary group nogroup,
// supplementary `groups`, e.g. "users"; empty: none), via setpriv.
CommandResult TpuctlAsNobody(const TpudProcess& tpud, const std::string& groups,
                             const std::vector<std::string>& args, Seconds timeout = Seconds(15));
uid_t NobodyUid();

// A tmpfs mounted at `path` (created) with mount options `options` (e.g.
// "size=256k,nr_inodes=64"), unmounted (lazily) when destroyed.
class Tmpfs {
 public:
  // Throws std::runtime_error when mount(8) fails.
  Tmpfs(const std::filesystem::path& path, const std::string& options);
  ~Tmpfs();
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  // Fills the filesystem's remaining space (and inodes with `inodes`) with
  // files under `name`; Free() removes them again.
  void Fill(const std::string& name = "filler", bool inodes = false);
  void Free();

 private:
  std::filesystem::path path_;
  std::vector<std::filesystem::path> fillers_;
};
// Root and mount(8) working; else WARNs that the test is skipped.
bool CanMountTmpfs();

// A stub on `tpud`'s socket with a 20 s deadline per call (SetDeadline).
std::unique_ptr<v1::Supervisor::Stub> StubFor(const TpudProcess& tpud);
grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx);

// /proc/PID/status's "Uid:" real uid; -1 when the process is gone.
long ProcessUid(int pid);
// The pid in `file` (written by a job), or -1.
int PidFromFile(const std::filesystem::path& file);
// True while `pid` exists and is not a zombie.
bool Alive(int pid);

}  // namespace tpud::testing
