// The child process the supervisor benchmarks (bench/run_bench.py) supervise,
// the same binary under tpud and under supervisord so only the supervisor
// differs. Modes:
//
//   bench_child restart FILE [LIFETIME_MS]
//       Appends "start <ns>" to FILE, lives LIFETIME_MS (default 0), appends
//       "exit <ns>" and exits 1. Times are CLOCK_MONOTONIC nanoseconds, which
//       every process on the machine shares, so the benchmark reads restart
//       latency (one attempt's exit -> the next one's start) off FILE.
//   bench_child quiet
//       Sleeps until killed: a job that prints nothing and never wakes up.
//   bench_child ignore-term FILE
//       Ignores SIGTERM (and SIGINT), appends "ready <ns>" to FILE, sleeps
//       until SIGKILL: the job a stop ladder has to escalate past.
//   bench_child floor FILE N
//       Runs `bench_child restart FILE` N times, one after the other, each by
//       posix_spawn(3) (vfork and exec) and waitpid(2): the same restart
//       latency with no supervisor, the floor tpud's figure is set beside.
//   bench_child flood BYTES
//       Writes BYTES of 100-byte lines ("x..x\n") to stdout in 65,500-byte
//       writes (655 lines each), then exits 0.
//
// Exit codes: 1 for `restart` (the point is to be restarted), 0 after a
// complete flood, 2 for bad usage or a failed write.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

long long MonotonicNanos() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// One O_APPEND write per record, so concurrent writers never interleave.
bool AppendRecord(const char* file, const char* what) {
  const int fd = ::open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  char line[64];
  const int n = std::snprintf(line, sizeof line, "%s %lld\n", what, MonotonicNanos());
  const bool ok = ::write(fd, line, static_cast<std::size_t>(n)) == n;
  ::close(fd);
  return ok;
}

void SleepMillis(long millis) {
  timespec ts{millis / 1000, (millis % 1000) * 1'000'000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int Floor(const char* self, char* file, long runs) {
  char restart[] = "restart";
  char* args[] = {const_cast<char*>(self), restart, file, nullptr};
  for (long i = 0; i < runs; ++i) {
    pid_t pid = 0;
    if (posix_spawn(&pid, self, nullptr, nullptr, args, environ) != 0) return 2;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: bench_child restart FILE [LIFETIME_MS] | floor FILE N | quiet | ignore-term FILE | "
               "flood BYTES\n");
  return 2;
}

int Flood(long long bytes) {
  constexpr int kLine = 100;
  constexpr int kLinesPerWrite = 655;
  static char buffer[kLine * kLinesPerWrite];
  for (int i = 0; i < kLinesPerWrite; ++i) {
    std::memset(buffer + i * kLine, 'x', kLine - 1);
    buffer[i * kLine + kLine - 1] = '\n';
  }
  while (bytes > 0) {
    const std::size_t want = static_cast<std::size_t>(std::min<long long>(bytes, sizeof buffer));
    std::size_t done = 0;
    while (done < want) {
      const ssize_t n = ::write(STDOUT_FILENO, buffer + done, want - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 2;
      done += static_cast<std::size_t>(n);
    }
    bytes -= static_cast<long long>(want);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string mode = argv[1];
  if (mode == "restart" && (argc == 3 || argc == 4)) {
    if (!AppendRecord(argv[2], "start")) return 2;
    if (argc == 4) SleepMillis(std::atol(argv[3]));
    if (!AppendRecord(argv[2], "exit")) return 2;
    return 1;
  }
  if (mode == "quiet" && argc == 2) {
    while (true) ::pause();
  }
  if (mode == "ignore-term" && argc == 3) {
    ::signal(SIGTERM, SIG_IGN);
    ::signal(SIGINT, SIG_IGN);
    if (!AppendRecord(argv[2], "ready")) return 2;
    while (true) ::pause();
  }
  if (mode == "flood" && argc == 3) return Flood(std::atoll(argv[2]));
  if (mode == "floor" && argc == 4) return Floor(argv[0], argv[2], std::atol(argv[3]));
  return Usage();
}
