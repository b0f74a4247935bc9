// The "local" TPU backend with a temp dir standing in for /dev and /tmp: the
// "device files" are regular files, and their holders are real child
// processes (python3) that opened them; the real /proc is scanned.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/tpu/device_holders.h"
#include "daemon/tpu/local_control.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace tpud {
namespace {

namespace fs = std::filesystem;

// Python run by a holder: opens argv[1] (and lockf's it when argv[2] is
// "lock"), optionally ignores SIGTERM ("ignore-term"), says "ready", waits.
constexpr char kHolderScript[] = R"(
import fcntl, os, signal, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
if "lock" in sys.argv[2:]:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
if "ignore-term" in sys.argv[2:]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
)";

// A child process holding `path` open, in its own process group.
class Holder {
 public:
  explicit Holder(const std::string& path, const std::string& mode = "") {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    std::vector<std::string> args = {"/usr/bin/python3", "-c", kHolderScript, path, mode};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    if (rc != 0) throw std::runtime_error("spawn holder");
    stdout_fd_ = out[0];  // Kept open: the child must never write into a closed pipe.
    WaitReady();
  }
  ~Holder() {
    ::close(stdout_fd_);
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;

  int pid() const { return pid_; }
  // Reaps the child if it has ended (waiting up to `wait_ms`); the
  // terminating signal, or 0 while it still runs.
  int KilledBy(int wait_ms = 2000) {
    for (int i = 0; i < wait_ms / 10 && !reaped_; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
      } else {
        ::usleep(10'000);
      }
    }
    return signal_;
  }

 private:
  void WaitReady() {
    std::string text;
    char buf[16];
    pollfd p{stdout_fd_, POLLIN, 0};
    while (text.find("ready\n") == std::string::npos && ::poll(&p, 1, 10'000) > 0) {
      const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    if (text.find("ready\n") == std::string::npos) {
      ::close(stdout_fd_);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      throw std::runtime_error("holder did not start");
    }
  }

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  int signal_ = 0;
};

// A temp "/dev" with two accelerator files and a lock file path.
struct LocalRig {
  testing::TempDir dir{"tpud-local-test"};
  std::string accel0 = dir.File("dev/accel0");
  std::string accel1 = dir.File("dev/accel1");
  std::string lock_file = (dir.path() / "libtpu_lockfile").string();
  std::vector<std::string> progress;

  std::unique_ptr<TpuControl> Control(double grace_seconds = 5, double timeout_seconds = 20) {
    TpuConfig config;
    config.backend = "local";
    config.device_globs = {(dir.path() / "dev/accel*").string(), (dir.path() / "vfio/*").string()};
    config.lock_file = lock_file;
    config.stop_grace_seconds = grace_seconds;
    config.timeout_seconds = timeout_seconds;
    config.local_poll_interval_seconds = 0.02;
    return *MakeTpuControl(config);
  }
  TpuCall Call() {
    TpuCall call;
    call.progress = [this](const std::string& line) { progress.push_back(line); };
    return call;
  }
  bool Said(const std::string& wanted) const {
    for (const std::string& line : progress) {
      if (line.find(wanted) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_CASE("TPU local: a process holding a device file is found and stopped with SIGTERM", "[tpu]") {
  LocalRig rig;
  Holder holder(rig.accel1);
  std::unique_ptr<TpuControl> control = rig.Control();
  REQUIRE(control->name() == "local");

  absl::StatusOr<std::vector<FileHolder>> found =
      static_cast<LocalTpuControl&>(*control).FindHolders(rig.Call());
  REQUIRE(found.ok());
  REQUIRE(found->size() == 1);
  CHECK((*found)[0].pid == holder.pid());
  CHECK((*found)[0].path == rig.accel1);
  CHECK((*found)[0].comm == "python3");

  REQUIRE(control->Reset(rig.Call()).ok());
  CHECK(holder.KilledBy() == SIGTERM);
  CHECK(rig.Said("pid " + std::to_string(holder.pid()) + " (python3) holds " + rig.accel1));
  CHECK(rig.Said("sent SIGTERM to pid " + std::to_string(holder.pid())));
  CHECK(rig.Said("TPU devices free"));
}

TEST_CASE("TPU local: a holder that ignores SIGTERM gets SIGKILL after the grace period", "[tpu]") {
  LocalRig rig;
  Holder holder(rig.accel0, "ignore-term");
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(rig.Control(/*grace_seconds=*/0.3)->Reset(rig.Call()).ok());
  CHECK(holder.KilledBy() == SIGKILL);
  CHECK(rig.Said("sent SIGTERM"));
  CHECK(rig.Said("sent SIGKILL"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("TPU local: a stale lock file is removed", "[tpu]") {
  LocalRig rig;
  rig.dir.File("libtpu_lockfile");
  REQUIRE(rig.Control()->Reset(rig.Call()).ok());
  CHECK_FALSE(fs::exists(rig.lock_file));
  CHECK(rig.Said("no process holds the TPU"));
  CHECK(rig.Said("removed stale lock file " + rig.lock_file));
}

TEST_CASE("TPU local: a lock file held with lockf by a live process is not removed", "[tpu]") {
  LocalRig rig;
  Holder locker(rig.lock_file, "lock");
  CHECK(*LockHolderPid(rig.lock_file) == locker.pid());

  absl::Status removal = RemoveStaleLockFile(rig.lock_file, "/proc");
  CHECK(removal.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(removal.message()),
             Catch::Contains("locked by pid " + std::to_string(locker.pid())));
  CHECK(fs::exists(rig.lock_file));

  // Spared by the caller (say tpud supervises it): Reset refuses and signals nothing.
  TpuCall call = rig.Call();
  call.spare_pids = {locker.pid()};
  absl::Status reset = rig.Control()->Reset(call);
  CHECK(reset.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(fs::exists(rig.lock_file));
  CHECK(locker.KilledBy(/*wait_ms=*/100) == 0);  // Still running.
}

TEST_CASE("TPU local: a lock file open in a live process (without a lock) is not removed", "[tpu]") {
  LocalRig rig;
  Holder opener(rig.lock_file);
  CHECK(*LockHolderPid(rig.lock_file) == 0);
  absl::Status removal = RemoveStaleLockFile(rig.lock_file, "/proc");
  CHECK(removal.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(removal.message()), Catch::Contains("open in pid " + std::to_string(opener.pid())));
  CHECK(fs::exists(rig.lock_file));
}

TEST_CASE("TPU local: the holder of a lock is stopped, then the lock file is removed", "[tpu]") {
  LocalRig rig;
  Holder locker(rig.lock_file, "lock");
  REQUIRE(rig.Control()->Reset(rig.Call()).ok());
  CHECK(locker.KilledBy() == SIGTERM);
  CHECK_FALSE(fs::exists(rig.lock_file));
}

TEST_CASE("TPU local: processes in a spared process group are never signalled", "[tpu]") {
  LocalRig rig;
  Holder supervised(rig.accel0);
  TpuCall call = rig.Call();
  call.spare_pgids = {supervised.pid()};  // Its own group (tpud's attempts lead theirs).
  absl::Status reset = rig.Control()->Reset(call);
  CHECK(reset.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(reset.message()),
             Catch::Contains("tpud supervises: pid " + std::to_string(supervised.pid())));
  CHECK(supervised.KilledBy(/*wait_ms=*/100) == 0);  // Still running.
}

TEST_CASE("TPU local: Describe and Start are Unimplemented", "[tpu]") {
  LocalRig rig;
  std::unique_ptr<TpuControl> control = rig.Control();
  CHECK(control->Describe(nullptr).status().code() == absl::StatusCode::kUnimplemented);
  CHECK(control->Start(rig.Call()).code() == absl::StatusCode::kUnimplemented);
}

TEST_CASE("TPU local: ExpandGlobs lists existing matches, sorted and deduplicated", "[tpu]") {
  LocalRig rig;
  const std::string dev = (rig.dir.path() / "dev").string();
  CHECK(ExpandGlobs({dev + "/accel*", dev + "/accel0", dev + "/vfio/*"}) ==
        std::vector<std::string>{rig.accel0, rig.accel1});
}

}  // namespace
}  // namespace tpud
