#include "tests/integration/harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#define CATCH_CONFIG_EXTERNAL_INTERFACES  // For the listener below.
#include <catch2/catch.hpp>

#include "tests/integration/processes.h"

extern char** environ;

namespace tpud::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(50);

// Set by the listener when an assertion of the current test case fails.
bool g_test_failed = false;

class MarkFailedTests final : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    g_test_failed = false;
    TestEventListenerBase::testCaseStarting(info);
  }
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) g_test_failed = true;
    return TestEventListenerBase::assertionEnded(stats);
  }
};
CATCH_REGISTER_LISTENER(MarkFailedTests)

Clock::time_point DeadlineAfter(Seconds timeout) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::runtime_error SystemError(const std::string& what, int error) {
  return std::runtime_error(what + ": " + std::strerror(error));
}

// Owns a posix_spawn_file_actions_t.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  void Open(int fd, const fs::path& path, int flags) {
    posix_spawn_file_actions_addopen(&actions_, fd, path.c_str(), flags, 0644);
  }
  void Dup(int from, int to) { posix_spawn_file_actions_adddup2(&actions_, from, to); }
  const posix_spawn_file_actions_t* get() const { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

int Spawn(const std::vector<std::string>& argv, const FileActions& actions) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, args[0], actions.get(), nullptr, args.data(), environ);
  if (error != 0) throw SystemError("spawn " + argv[0], error);
  return pid;
}

// Reads both pipes until EOF on both (true) or the deadline (false).
bool ReadPipes(int out_fd, int err_fd, Clock::time_point deadline, CommandResult& result) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open = 2;
  while (open > 0) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll() skips negative fds.
        --open;
      }
    }
  }
  return true;
}

// waitpid(pid) polled until the deadline; nullopt when still running.
std::optional<int> WaitUntil(int pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return ExitCodeOf(status);
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

nlohmann::json ParseJson(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(what + ": invalid JSON (" + e.what() + "): " + text);
  }
}

std::size_t AppendBody(char* data, std::size_t size, std::size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

std::string DescribeFailure(const std::vector<std::string>& args, const CommandResult& result) {
  std::string command = "tpuctl";
  for (const std::string& arg : args) command += " " + arg;
  return command + ": exit " + std::to_string(result.exit_code) +
         (result.timed_out ? " (timed out)" : "") + ": " + result.err;
}

std::string ConfigYaml(const TempDir& dir, const std::string& jobs_yaml,
                       const std::string& daemon_yaml) {
  std::string yaml = "socket: " + YamlQuote((dir / "tpud.sock").string()) + "\n" +
                     "state_dir: " + YamlQuote((dir / "state").string()) + "\n" +
                     "log_dir: " + YamlQuote((dir / "logs").string()) + "\n" +
                     "metrics:\n  listen: \"127.0.0.1:0\"\n";
  if (!daemon_yaml.empty()) yaml += daemon_yaml + "\n";
  // Tests end tpud with SIGTERM: stop its jobs too, so none outlives the test
  // (tests of surviving a daemon restart SIGKILL tpud, or say otherwise).
  if (daemon_yaml.find("stop_jobs_on_exit") == std::string::npos) yaml += "stop_jobs_on_exit: true\n";
  return yaml + (jobs_yaml.empty() ? "jobs: []\n" : "jobs:\n" + jobs_yaml + "\n");
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, Seconds timeout,
                         const fs::path& stdin_path) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
  if (::pipe2(err, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
  FileActions actions;
  actions.Open(0, stdin_path, O_RDONLY);
  actions.Dup(out[1], 1);
  actions.Dup(err[1], 2);
  const int pid = Spawn(argv, actions);
  ::close(out[1]);
  ::close(err[1]);
  CommandResult result;
  const Clock::time_point deadline = DeadlineAfter(timeout);
  const bool finished = ReadPipes(out[0], err[0], deadline, result);
  ::close(out[0]);
  ::close(err[0]);
  std::optional<int> code = finished ? WaitUntil(pid, deadline) : std::nullopt;
  if (!code) {
    result.timed_out = true;
    ::kill(pid, SIGKILL);
    code = WaitUntil(pid, DeadlineAfter(Seconds(5)));
  }
  result.exit_code = code.value_or(-1);
  return result;
}

CommandResult RunTpuctl(const std::vector<std::string>& args, Seconds timeout) {
  std::vector<std::string> argv = {TPUCTL_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

bool WaitFor(const std::function<bool()>& predicate, Seconds timeout) {
  const Clock::time_point deadline = DeadlineAfter(timeout);
  while (true) {
    const bool late = Clock::now() >= deadline;
    if (predicate()) return true;
    if (late) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string YamlQuote(const std::string& text) { return nlohmann::json(text).dump(); }

HttpResult HttpGet(const std::string& url) {
  HttpResult result;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    result.error = "curl_easy_init failed";
    return result;
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  } else {
    result.error = curl_easy_strerror(code);
  }
  curl_easy_cleanup(curl);
  return result;
}

TpudProcess::TpudProcess(const TempDir& dir, const std::string& jobs_yaml, Seconds ready_timeout)
    : TpudProcess(dir, jobs_yaml, "", ready_timeout) {}

TpudProcess::TpudProcess(const TempDir& dir, const std::string& jobs_yaml,
                         const std::string& daemon_yaml, Seconds ready_timeout)
    : socket_(dir / "tpud.sock"),
      config_path_(dir.WriteFile("tpud.yaml", ConfigYaml(dir, jobs_yaml, daemon_yaml))),
      stderr_path_(dir / "tpud.stderr") {
  BecomeSubreaper();
  FileActions actions;
  actions.Open(0, "/dev/null", O_RDONLY);
  actions.Open(1, stderr_path_, O_WRONLY | O_CREAT | O_TRUNC);
  actions.Dup(1, 2);
  pid_ = Spawn({TPUD_BIN, "--config", config_path_.string()}, actions);
  KeepChild(pid_);
  WaitUntilReady(ready_timeout);
}

TpudProcess::~TpudProcess() {
  const std::optional<int> code = Shutdown();
  KillOrphans();  // Whatever tpud left behind must not outlive the test.
  if (g_test_failed || std::uncaught_exceptions() > 0 || code != 0) {
    std::cerr << "---- tpud output (" << stderr_path_.string() << "), exit "
              << (code ? std::to_string(*code) : "killed") << " ----\n"
              << StderrText() << "---- end of tpud output ----\n";
  }
}

void TpudProcess::WaitUntilReady(Seconds timeout) {
  const bool answered = WaitFor(
      [&] {
        if (std::optional<int> code = WaitUntil(pid_, Clock::now())) {
          exited_ = true;
          exit_code_ = code;
          return true;
        }
        return RunTpuctl({"--socket", socket_.string(), "status"}).exit_code == 0;
      },
      timeout);
  if (exited_) FailStartup("tpud exited with " + std::to_string(*exit_code_) + " at startup");
  if (!answered) FailStartup("tpud did not answer `tpuctl status` within the timeout");
}

void TpudProcess::FailStartup(const std::string& what) {
  Shutdown(Seconds(2));
  throw std::runtime_error(what + "; its output:\n" + StderrText());
}

CommandResult TpudProcess::Tpuctl(const std::vector<std::string>& args, Seconds timeout) const {
  std::vector<std::string> full = {"--socket", socket_.string()};
  full.insert(full.end(), args.begin(), args.end());
  return RunTpuctl(full, timeout);
}

nlohmann::json TpudProcess::Status(const std::string& job) const {
  const std::vector<std::string> args = {"status", job, "--json"};
  const CommandResult result = Tpuctl(args);
  if (result.exit_code != 0) throw std::runtime_error(DescribeFailure(args, result));
  return ParseJson(result.out, "tpuctl status --json");
}

nlohmann::json TpudProcess::Info() const {
  const std::vector<std::string> args = {"info", "--json"};
  const CommandResult result = Tpuctl(args);
  if (result.exit_code != 0) throw std::runtime_error(DescribeFailure(args, result));
  return ParseJson(result.out, "tpuctl info --json");
}

std::vector<nlohmann::json> TpudProcess::Events(const std::string& job) const {
  const std::vector<std::string> args = {"events", job, "--json"};
  const CommandResult result = Tpuctl(args);
  if (result.exit_code != 0) throw std::runtime_error(DescribeFailure(args, result));
  std::vector<nlohmann::json> events;
  for (const std::string& line : Lines(result.out)) {
    events.push_back(ParseJson(line, "tpuctl events --json"));
  }
  return events;
}

std::string TpudProcess::Logs(const std::string& job, int lines) const {
  const std::vector<std::string> args = {"logs", job, "-n", std::to_string(lines)};
  const CommandResult result = Tpuctl(args);
  if (result.exit_code != 0) throw std::runtime_error(DescribeFailure(args, result));
  return result.out;
}

nlohmann::json TpudProcess::WaitForState(const std::string& job, const std::string& state,
                                         Seconds timeout) const {
  nlohmann::json last;
  WaitFor(
      [&] {
        last = Status(job);
        return last["state"] == state;
      },
      timeout);
  return last;
}

std::optional<int> TpudProcess::Shutdown(Seconds timeout) {
  if (exited_) return exit_code_;
  exited_ = true;
  ::kill(pid_, SIGTERM);
  exit_code_ = WaitUntil(pid_, DeadlineAfter(timeout));
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    WaitUntil(pid_, DeadlineAfter(Seconds(5)));
  }
  ReleaseChild(pid_);
  return exit_code_;
}

}  // namespace tpud::testing
