// ShimLauncher with the real tpud-shim and real trainers: the same behaviour
// as LocalLauncher, and attempts that survive the daemon going away.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>

#include "daemon/process/process_tree.h"
#include "daemon/process/spawn.h"
#include "tests/integration/shim_fixture.h"

namespace tpud::shim_testing {
namespace {

TEST_CASE("Shim: the attempt sees its env (empty values too), its working dir and no stdin",
          "[shim]") {
  TempDir dir;
  Recorder r =
      Run({"/bin/sh", "-c",
           "echo job=$TPUD_JOB; echo ckpt=${TPUD_CHECKPOINT-unset}; pwd; cat; echo done >&2"},
          dir, {{"TPUD_JOB", "digits"}, {"TPUD_CHECKPOINT", ""}});
  CHECK(r.exit->code == 0);
  REQUIRE(r.lines.size() == 4);
  CHECK(r.lines[0] == "job=digits");
  CHECK(r.lines[1] == "ckpt=");
  CHECK(r.lines[2] == dir.path().string());
  CHECK(r.lines[3] == "done");
  CHECK(ReadAll(dir.path() / "t.log") == "job=digits\nckpt=\n" + dir.path().string() + "\ndone\n");
}

TEST_CASE("Shim: the trainer's parent is the shim, not the daemon", "[shim]") {
  TempDir dir;
  Recorder r = Run({"/bin/sh", "-c", "echo $PPID; ls /proc/self/fd"}, dir);
  REQUIRE(r.lines.size() >= 2);
  CHECK(std::stoi(r.lines[0]) != ::getpid());
  // Only stdin, stdout, stderr and ls's own directory fd: nothing inherited.
  CHECK(r.lines.size() == 1 + 4);
}

TEST_CASE("Shim: exit code and terminating signal are reported", "[shim]") {
  TempDir dir;
  CHECK(Run({"/bin/sh", "-c", "exit 7"}, dir).exit->code == 7);
  const ExitStatus killed = *Run({"/bin/sh", "-c", "kill -KILL $$"}, dir).exit;
  CHECK(killed.signal == SIGKILL);
  CHECK(killed.Describe() == "killed by SIGKILL");
}

TEST_CASE("Shim: members left in the group when the main process exits are killed", "[shim]") {
  TempDir dir;
  const fs::path pid_file = dir.path() / "child.pid";
  Recorder r =
      Run({"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file.string() + "; exit 0"}, dir);
  CHECK(r.exit->code == 0);
  const pid_t child = std::stoi(ReadAll(pid_file));
  // SIGKILL was sent before OnExit; dying takes the kernel a moment on a busy
  // machine. Without the kill, `sleep 300` would still be sleeping in 2 s.
  CHECK(WaitFor(
      [&] {
        const std::string stat = ReadAll("/proc/" + std::to_string(child) + "/stat");
        return stat.empty() || stat.find(") Z ") != std::string::npos;
      },
      2s));
}

TEST_CASE("Shim: output written just before exit is delivered before OnExit", "[shim]") {
  TempDir dir;
  Recorder r = Run(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; exit 3"},
      dir);
  CHECK(r.exit->code == 3);
  REQUIRE(r.lines.size() == 2000);
  CHECK(r.lines.back() == "line 1999");
  CHECK(ShimLauncher::ListAttemptDirs(dir.path() / "state").empty());  // Consumed: removed.
}

TEST_CASE("Shim: SignalGroup reaches the trainer's process group", "[shim]") {
  TempDir dir;
  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto attempt = LaunchStarted(io, launcher, Spec(dir, {"/bin/sh", "-c", "echo up; sleep 300"}), &recorder);
  REQUIRE(attempt.ok());
  KillGroupAtEnd guard{(*attempt)->pid()};
  REQUIRE(RunUntil(io, [&] { return !recorder.lines.empty(); }));
  Recorder second;  // The same attempt again must not clobber the running one.
  auto again = LaunchStarted(io, launcher, Spec(dir, {"/bin/true"}), &second);
  CHECK(again.status().code() == absl::StatusCode::kAlreadyExists);
  REQUIRE((*attempt)->SignalGroup(SIGTERM).ok());
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  CHECK(recorder.exit->signal == SIGTERM);
  CHECK((*attempt)->SignalGroup(SIGTERM).ok());  // Gone is not an error.
}

TEST_CASE("Shim: a missing executable or working dir is the same clear error as LocalLauncher's",
          "[shim]") {
  TempDir dir;
  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto missing = LaunchStarted(io, launcher, Spec(dir, {"/no/such/binary"}), &recorder);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()) ==
        "spawn \"/no/such/binary\": No such file or directory");

  auto not_in_path = LaunchStarted(io, launcher, Spec(dir, {"no-such-command-tpud"}), &recorder);
  REQUIRE_FALSE(not_in_path.ok());
  CHECK(std::string(not_in_path.status().message()).find("not found in PATH") != std::string::npos);

  LaunchSpec no_dir = Spec(dir, {"/bin/true"});
  no_dir.working_dir = dir.path() / "absent";
  auto no_working_dir = LaunchStarted(io, launcher, no_dir, &recorder);
  REQUIRE_FALSE(no_working_dir.ok());
  CHECK(std::string(no_working_dir.status().message()).find("working_dir") != std::string::npos);
  CHECK(ShimLauncher::ListAttemptDirs(dir.path() / "state").empty());  // Nothing left behind.

  ShimLauncher::Options no_shim = Options(dir);
  no_shim.shim_path = dir.path() / "no-tpud-shim";
  auto shim_missing = ShimLauncher(io, no_shim).Launch(Spec(dir, {"/bin/true"}), &recorder);
  CHECK(shim_missing.status().code() == absl::StatusCode::kInternal);
  CHECK(std::string(shim_missing.status().message()).find("tpud-shim: spawn") != std::string::npos);
  CHECK_FALSE(recorder.exit.has_value());
}

// Launcher options whose tpud-shim starts only once the file GO exists in
// `dir` (and writes its pid to wrapper.pid first): what a slow shim start
// looks like. `ever` false: it never starts. No standby shim (it would be one
// more such wrapper).
ShimLauncher::Options HeldShimOptions(const TempDir& dir, bool ever) {
  const fs::path wrapper = dir.path() / "held-shim";
  std::ofstream(wrapper) << "#!/bin/sh\necho $$ > " << (dir.path() / "wrapper.pid").string() << "\n"
                         // Gives up when the test's directory is gone: a failed test leaves nothing looping.
                         << "while [ ! -e " << (dir.path() / "GO").string() << " ]; do [ -d " << dir.path().string()
                         << " ] || exit 1; sleep 0.02; done\n"
                         << (ever ? "exec " TPUD_SHIM_BIN " \"$@\"\n" : "sleep 300\n");
  fs::permissions(wrapper, fs::perms(0755));
  ShimLauncher::Options options = Options(dir);
  options.shim_path = wrapper;
  options.standby = false;
  return options;
}

int WrapperPid(const TempDir& dir) {
  int pid = -1;
  WaitFor([&] { return (std::ifstream(dir.path() / "wrapper.pid") >> pid) && pid > 0; });
  return pid;
}

TEST_CASE("Shim: Launch does not wait for the shim, and a stop sent while it starts reaches the trainer", "[shim]") {
  TempDir dir;
  boost::asio::io_context io;
  ShimLauncher::Options options = HeldShimOptions(dir, /*ever=*/true);
  ShimLauncher launcher(io, options);
  Recorder recorder;
  auto attempt = launcher.Launch(Spec(dir, {"/bin/sh", "-c", "sleep 300"}), &recorder);
  REQUIRE(attempt.ok());  // Returned although the shim cannot start before GO.
  CHECK((*attempt)->starting());
  CHECK((*attempt)->pid() == 0);
  bool ticked = false;  // The loop runs other work while the shim starts.
  boost::asio::steady_timer tick(io, 50ms);
  tick.async_wait([&](const boost::system::error_code&) { ticked = true; });
  REQUIRE(RunUntil(io, [&] { return ticked; }));
  CHECK_FALSE(recorder.started.has_value());
  REQUIRE((*attempt)->SignalGroup(SIGTERM).ok());  // Kept until the trainer runs.
  std::ofstream(dir.path() / "GO") << "";
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  REQUIRE(recorder.started.has_value());
  CHECK(recorder.started->ok());
  KillGroupAtEnd guard{(*attempt)->pid()};
  CHECK((*attempt)->pid() > 0);
  CHECK(recorder.exit->signal == SIGTERM);
}

TEST_CASE("Shim: a shim that never reports is a DeadlineExceeded start, and is killed and reaped", "[shim]") {
  TempDir dir;
  boost::asio::io_context io;
  ShimLauncher::Options options = HeldShimOptions(dir, /*ever=*/false);
  options.ready_timeout = 300ms;
  ShimLauncher launcher(io, options);
  Recorder recorder;
  auto attempt = LaunchStarted(io, launcher, Spec(dir, {"/bin/true"}), &recorder);
  CHECK(attempt.status().code() == absl::StatusCode::kDeadlineExceeded);
  const int wrapper = WrapperPid(dir);
  REQUIRE(wrapper > 0);
  CHECK(::kill(wrapper, 0) == -1);  // Killed and reaped: not even a zombie is left.
  CHECK_FALSE(recorder.exit.has_value());
  CHECK(ShimLauncher::ListAttemptDirs(dir.path() / "state").size() == 1);  // Left for Reattach or a person.
}

TEST_CASE("Shim: an attempt dropped while its shim starts runs on, and a new daemon re-attaches to it", "[shim]") {
  TempDir dir;
  int wrapper = -1;
  {
    boost::asio::io_context io;
    ShimLauncher::Options options = HeldShimOptions(dir, /*ever=*/true);
    ShimLauncher launcher(io, options);
    Recorder dropped;
    auto attempt = launcher.Launch(Spec(dir, Counter(dir, 6)), &dropped);
    REQUIRE(attempt.ok());
    wrapper = WrapperPid(dir);
    attempt->reset();  // Detached mid-start: no callback, the first shim process reaped off the loop.
    std::ofstream(dir.path() / "GO") << "";
    REQUIRE(RunUntil(io, [&] { return ::kill(wrapper, 0) == -1; }));
    CHECK_FALSE(dropped.started.has_value());
  }
  const std::vector<fs::path> dirs = ShimLauncher::ListAttemptDirs(dir.path() / "state");
  REQUIRE(dirs.size() == 1);
  REQUIRE(WaitFor([&] { return fs::exists(dirs[0] / "state.json"); }));
  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto again = launcher.Reattach(dirs[0], &recorder);
  REQUIRE(again.ok());
  KillGroupAtEnd guard{(*again)->pid()};
  std::ofstream(dir.path() / "STOP") << "";
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  CHECK(recorder.exit->code == 6);
}

TEST_CASE("Shim: the next attempt runs on the standby shim started after the last launch", "[shim]") {
  TempDir dir;
  const fs::path spawns = dir.path() / "spawns.log";
  const fs::path wrapper = dir.path() / "logged-shim";  // Logs each start's argument.
  std::ofstream(wrapper) << "#!/bin/sh\necho \"$1\" >> " << spawns.string() << "\nexec " TPUD_SHIM_BIN " \"$@\"\n";
  fs::permissions(wrapper, fs::perms(0755));
  boost::asio::io_context io;
  ShimLauncher::Options options = Options(dir);
  options.shim_path = wrapper;
  ShimLauncher launcher(io, options);
  Recorder first;
  auto one = LaunchStarted(io, launcher, Spec(dir, {"/bin/true"}), &first);
  REQUIRE(one.ok());
  REQUIRE(RunUntil(io, [&] { return first.exit.has_value() && ReadAll(spawns).find("--standby") != std::string::npos; }));
  LaunchSpec second_spec = Spec(dir, {"/bin/sh", "-c", "echo second; exit 4"});
  second_spec.attempt = 2;
  Recorder second;
  auto two = LaunchStarted(io, launcher, second_spec, &second);
  REQUIRE(two.ok());
  REQUIRE(RunUntil(io, [&] { return second.exit.has_value(); }));
  CHECK(second.exit->code == 4);
  CHECK(second.lines == std::vector<std::string>{"second"});
  // Only the first attempt started a shim of its own: the second ran on the standby.
  std::istringstream lines(ReadAll(spawns));
  int own = 0;
  for (std::string line; std::getline(lines, line);) own += line != "--standby" ? 1 : 0;
  CHECK(own == 1);
}

TEST_CASE("Shim: a standby shim whose daemon goes away exits having done nothing", "[shim]") {
  // Orphans come to this process, so the standby (the shim's grandchild) can be waited for.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  struct NoLongerReaper {
    ~NoLongerReaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  } restore;
  const std::vector<int> before = ChildPids(::getpid());
  LaunchSpec spec;
  spec.argv = {TPUD_SHIM_BIN, "--standby"};
  spec.working_dir = "/";
  absl::StatusOr<SpawnedProcess> shim = SpawnWithOutputPipe(TPUD_SHIM_BIN, spec, /*input_pipe=*/true);
  REQUIRE(shim.ok());
  int status = 0;
  REQUIRE(::waitpid(shim->pid, &status, 0) == shim->pid);  // The first process forks and exits 0.
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  int standby = -1;  // Its child, orphaned by that exit: now this process's.
  REQUIRE(WaitFor([&] {
    for (int child : ChildPids(::getpid())) {
      if (std::find(before.begin(), before.end(), child) == before.end()) standby = child;
    }
    return standby > 0;
  }));
  CHECK(::waitpid(standby, &status, WNOHANG) == 0);  // It lives on, waiting for a directory.
  ::close(shim->input_fd);                           // The daemon goes away.
  REQUIRE(WaitFor([&] { return ::waitpid(standby, &status, WNOHANG) == standby; }));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  char byte = 0;
  CHECK(::read(shim->output_fd, &byte, 1) == 0);  // It reported nothing.
  ::close(shim->output_fd);
}

TEST_CASE("Shim: the trainer survives the daemon going away, a new daemon re-attaches", "[shim]") {
  TempDir dir;
  Recorder before;
  int pid = -1;
  {
    boost::asio::io_context io;
    ShimLauncher launcher(io, Options(dir));
    auto attempt = LaunchStarted(io, launcher, Spec(dir, Counter(dir, 5)), &before);
    REQUIRE(attempt.ok());
    pid = (*attempt)->pid();
    REQUIRE(RunUntil(io, [&] { return before.lines.size() >= 3; }));
  }  // The daemon's attempt, launcher and loop are gone, as after a crash.
  KillGroupAtEnd guard{pid};
  const std::size_t log_size = fs::file_size(dir.path() / "t.log");
  std::this_thread::sleep_for(500ms);
  CHECK(Alive(pid));
  CHECK(fs::file_size(dir.path() / "t.log") > log_size);  // The shim kept writing the log.

  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  const std::vector<fs::path> dirs = ShimLauncher::ListAttemptDirs(dir.path() / "state");
  REQUIRE(dirs.size() == 1);
  Recorder after;
  auto attempt = launcher.Reattach(dirs[0], &after);
  REQUIRE(attempt.ok());
  CHECK((*attempt)->pid() == pid);
  REQUIRE(RunUntil(io, [&] { return after.lines.size() >= 3; }));
  CHECK(std::stoi(after.lines.front()) > std::stoi(before.lines.back()));
  std::ofstream(dir.path() / "STOP").put('\n');
  REQUIRE(RunUntil(io, [&] { return after.exit.has_value(); }));
  CHECK(after.exit->code == 5);  // Not SIGPIPE: its output never broke.
  CHECK(after.lines.back() == "end");
  CheckConsecutive(after.lines);
  CheckLogHasNoGap(dir.path() / "t.log", 10);
  CHECK(ShimLauncher::ListAttemptDirs(dir.path() / "state").empty());
}

TEST_CASE("Shim: an exit while no daemon is attached is delivered on Reattach from exit.json",
          "[shim]") {
  TempDir dir;
  int pid = -1;
  {
    boost::asio::io_context io;
    ShimLauncher launcher(io, Options(dir));
    Recorder recorder;
    auto attempt = LaunchStarted(io, launcher, Spec(dir, Counter(dir, 3)), &recorder);
    REQUIRE(attempt.ok());
    pid = (*attempt)->pid();
  }
  KillGroupAtEnd guard{pid};
  std::ofstream(dir.path() / "STOP").put('\n');
  const fs::path attempt_dir = ShimLauncher::ListAttemptDirs(dir.path() / "state").at(0);
  REQUIRE(WaitFor([&] { return !fs::exists(attempt_dir / "shim.sock"); }));  // The shim is done.
  CHECK(fs::exists(attempt_dir / "exit.json"));

  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto attempt = launcher.Reattach(attempt_dir, &recorder);
  REQUIRE(attempt.ok());
  CHECK((*attempt)->pid() == pid);
  CHECK_FALSE(recorder.exit.has_value());  // Delivered on the loop, not inline.
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  CHECK(recorder.exit->code == 3);
  CheckLogHasNoGap(dir.path() / "t.log", 0);
  CHECK_FALSE(fs::exists(attempt_dir));
}

TEST_CASE("Shim: output past the buffer while detached is dropped from the stream, not the log",
          "[shim]") {
  TempDir dir;
  const std::vector<std::string> argv = {
      "/bin/sh", "-c",
      "seq 1 1000000; while " + UntilStop(dir) + "; do sleep 0.05; done; echo last"};
  int pid = -1;
  {
    boost::asio::io_context io;
    ShimLauncher launcher(io, Options(dir));
    Recorder ignored;
    auto attempt = LaunchStarted(io, launcher, Spec(dir, argv), &ignored);
    REQUIRE(attempt.ok());
    pid = (*attempt)->pid();
  }
  KillGroupAtEnd guard{pid};
  const std::uintmax_t seq_bytes = 6888896;  // `seq 1 1000000 | wc -c`
  REQUIRE(WaitFor([&] { return fs::file_size(dir.path() / "t.log") == seq_bytes; }));

  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto attempt =
      launcher.Reattach(ShimLauncher::ListAttemptDirs(dir.path() / "state").at(0), &recorder);
  REQUIRE(attempt.ok());
  std::ofstream(dir.path() / "STOP").put('\n');
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  CHECK(recorder.exit->code == 0);
  REQUIRE(recorder.lines.size() > 1);
  CHECK(recorder.lines.size() < 1000000);  // At most 4 MiB were kept for the stream...
  CHECK(recorder.lines.back() == "last");  // ...and it resumed with whole lines.
  CHECK(FirstOutOfOrder(recorder.lines, [](int a, int b) { return b > a; }) ==
        recorder.lines.size());
  CHECK(fs::file_size(dir.path() / "t.log") == seq_bytes + 5);  // The log has every byte.
}

TEST_CASE("Shim: the trainer survives a SIGKILLed daemon", "[shim]") {
  TempDir dir;
  const fs::path pid_file = dir.path() / "trainer.pid";
  const pid_t daemon = ::fork();
  REQUIRE(daemon >= 0);
  struct KillDaemonAtEnd {
    pid_t pid;
    ~KillDaemonAtEnd() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } daemon_guard{daemon};
  if (daemon == 0) {  // A stand-in daemon that gets killed mid-attempt.
    boost::asio::io_context io;
    ShimLauncher launcher(io, Options(dir));
    Recorder recorder;
    auto attempt = LaunchStarted(io, launcher, Spec(dir, Counter(dir, 4)), &recorder);
    if (!attempt.ok()) ::_exit(1);
    std::ofstream(pid_file) << (*attempt)->pid() << "\n";
    RunUntil(
        io, [] { return false; }, 60s);
    ::_exit(0);
  }
  REQUIRE(WaitFor([&] { return fs::exists(pid_file) && !ReadAll(pid_file).empty(); }));
  const int pid = std::stoi(ReadAll(pid_file));
  KillGroupAtEnd guard{pid};
  std::this_thread::sleep_for(200ms);
  ::kill(daemon, SIGKILL);
  ::waitpid(daemon, nullptr, 0);
  daemon_guard.pid = -1;
  std::this_thread::sleep_for(300ms);
  CHECK(Alive(pid));

  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto attempt =
      launcher.Reattach(ShimLauncher::ListAttemptDirs(dir.path() / "state").at(0), &recorder);
  REQUIRE(attempt.ok());
  REQUIRE(RunUntil(io, [&] { return recorder.lines.size() >= 2; }));
  std::ofstream(dir.path() / "STOP").put('\n');
  REQUIRE(RunUntil(io, [&] { return recorder.exit.has_value(); }));
  CHECK(recorder.exit->code == 4);
  CheckLogHasNoGap(dir.path() / "t.log", 5);
}

TEST_CASE("Shim: Reattach to a directory with neither a shim nor exit.json is NotFound", "[shim]") {
  TempDir dir;
  boost::asio::io_context io;
  ShimLauncher launcher(io, Options(dir));
  Recorder recorder;
  auto attempt = launcher.Reattach(dir.path(), &recorder);
  REQUIRE_FALSE(attempt.ok());
  CHECK(attempt.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(attempt.status().message()).find(dir.path().string()) != std::string::npos);
}

}  // namespace
}  // namespace tpud::shim_testing
