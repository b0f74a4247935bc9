#include "tests/integration/prometheus_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tests/integration/processes.h"

extern char** environ;

namespace tpud::testing {
namespace {

// A loopback port nobody listens on now (Prometheus cannot be told port 0).
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("no free loopback port");
  return ntohs(addr.sin_port);
}

// Starts argv with stdout and stderr appended to `log`; returns its pid.
int Spawn(std::vector<std::string> argv_s, const std::filesystem::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (std::string& arg : argv_s) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv_s[0] + ": " + std::strerror(rc));
  return pid;
}

std::string UrlEncode(const std::string& text) {
  std::unique_ptr<char, decltype(&curl_free)> escaped(
      curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size())), curl_free);
  if (!escaped) throw std::runtime_error("curl_easy_escape failed");
  return escaped.get();
}

}  // namespace

PrometheusProcess::PrometheusProcess(const TempDir& dir, const std::string& config_yaml)
    : address_("127.0.0.1:" + std::to_string(FreeLoopbackPort())), log_path_(dir / "prometheus.log") {
  const auto config = dir.WriteFile("prometheus.yml",
                                    "global: {scrape_interval: 1s, evaluation_interval: 1s}\n" + config_yaml);
  pid_ = Spawn({"prometheus", "--config.file=" + config.string(),
                "--storage.tsdb.path=" + (dir / "prometheus-data").string(), "--web.listen-address=" + address_},
               log_path_);
  KeepChild(pid_);
  const bool ready = WaitFor(
      [&] {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          ReleaseChild(pid_);
          pid_ = -1;
          throw std::runtime_error("prometheus exited (status " + std::to_string(status) + "):\n" + LogText());
        }
        return HttpGet("http://" + address_ + "/-/ready").status == 200;
      },
      Seconds(30));
  if (!ready) {
    Stop();
    throw std::runtime_error("prometheus not ready after 30 s:\n" + LogText());
  }
}

PrometheusProcess::~PrometheusProcess() { Stop(); }

void PrometheusProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (!WaitFor([&] { return ::waitpid(pid_, nullptr, WNOHANG) == pid_; }, Seconds(10))) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ReleaseChild(pid_);
  pid_ = -1;
}

nlohmann::json PrometheusProcess::Query(const std::string& expr) const {
  const HttpResult got = HttpGet("http://" + address_ + "/api/v1/query?query=" + UrlEncode(expr));
  if (got.status == 0) return {{"status", "error"}, {"error", "GET failed: " + got.error}};
  nlohmann::json body = nlohmann::json::parse(got.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return {{"status", "error"}, {"error", "not JSON: " + got.body}};
  return body;
}

}  // namespace tpud::testing
