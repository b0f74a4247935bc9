#include "tests/support/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

#include "daemon/etcd/grpc_etcd_client.h"
#include "daemon/process/process_tree.h"

extern char** environ;

namespace tpud::testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

// Binds `count` loopback sockets to port 0, reads their ports, closes them.
std::vector<int> FreePorts(int count) {
  std::vector<int> fds, ports;
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("etcd fixture: cannot bind a loopback port");
    }
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

std::unique_ptr<etcd::GrpcEtcdClient> ClientFor(const std::string& endpoint) {
  etcd::ClientOptions options;
  options.endpoints = {endpoint};
  options.dial_timeout = std::chrono::milliseconds(500);
  options.request_timeout = std::chrono::milliseconds(1000);
  auto client = etcd::GrpcEtcdClient::Create(options);
  if (!client.ok()) throw std::runtime_error("etcd fixture: " + std::string(client.status().message()));
  return *std::move(client);
}

}  // namespace

EtcdCluster::EtcdCluster(int members) {
  if (members != 1 && members != 3) throw std::invalid_argument("etcd fixture: 1 or 3 members");
  if (::access(kEtcd, X_OK) != 0) throw std::runtime_error("etcd fixture: no /usr/bin/etcd (apt-get install etcd-server)");
  for (int attempt = 1;; ++attempt) {
    if (TryStart(members)) return;
    const std::string log = LogTail(0, 30);
    KillAll();
    if (attempt == 3) {
      throw std::runtime_error("etcd fixture: cluster did not come up: " + start_error_ + "; member 0 log:\n" + log);
    }
  }
}

EtcdCluster::~EtcdCluster() { KillAll(); }

bool EtcdCluster::TryStart(int count) {
  std::random_device random;
  token_ = "tpud-test-" + std::to_string(random());
  const std::vector<int> ports = FreePorts(2 * count);
  members_.assign(count, Member{});
  for (int i = 0; i < count; ++i) {
    Member& m = members_[i];
    m.name = "e" + std::to_string(i);
    m.data_dir = (dir_.path() / (token_ + "-" + m.name)).string();
    m.log_file = (dir_.path() / (token_ + "-" + m.name + ".log")).string();
    m.client_port = ports[2 * i];
    m.peer_port = ports[2 * i + 1];
  }
  for (Member& m : members_) Launch(m);
  try {
    for (int i = 0; i < count; ++i) WaitHealthy(i);
  } catch (const std::runtime_error& e) {
    start_error_ = e.what();
    return false;
  }
  return true;
}

std::string EtcdCluster::InitialCluster() const {
  std::string out;
  for (const Member& m : members_) out += (out.empty() ? "" : ",") + m.name + "=" + Url(m.peer_port);
  return out;
}

void EtcdCluster::Launch(Member& m) {
  std::vector<std::string> args = {kEtcd,
                                   "--name", m.name,
                                   "--data-dir", m.data_dir,
                                   "--listen-client-urls", Url(m.client_port),
                                   "--advertise-client-urls", Url(m.client_port),
                                   "--listen-peer-urls", Url(m.peer_port),
                                   "--initial-advertise-peer-urls", Url(m.peer_port),
                                   "--initial-cluster", InitialCluster(),
                                   "--initial-cluster-token", token_,
                                   "--initial-cluster-state", "new",
                                   "--heartbeat-interval", "50",
                                   "--election-timeout", "500",
                                   "--logger", "zap",
                                   "--log-outputs", "stderr"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // fork + exec rather than posix_spawn: the member dies with this process
  // (PR_SET_PDEATHSIG), so a test killed mid-run leaves no etcd behind.
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("etcd fixture: fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // The parent is already gone.
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(m.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) ::_exit(127);
    ::execv(kEtcd, argv.data());
    ::_exit(127);
  }
  m.pid = pid;
}

std::string EtcdCluster::endpoint(int member) const {
  return "127.0.0.1:" + std::to_string(members_.at(member).client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
  return out;
}

pid_t EtcdCluster::pid(int member) const { return members_.at(member).pid; }

bool EtcdCluster::running(int member) {
  Member& m = members_.at(member);
  if (m.pid > 0 && ::waitpid(m.pid, nullptr, WNOHANG) == m.pid) m.pid = -1;
  return m.pid > 0;
}

void EtcdCluster::Signal(int member, int signal) const {
  const pid_t pid = members_.at(member).pid;
  if (pid <= 0) throw std::runtime_error("etcd fixture: member " + std::to_string(member) + " is not running");
  ::kill(pid, signal);
}

void EtcdCluster::Reap(int member) {
  Member& m = members_.at(member);
  if (m.pid > 0) ::waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

void EtcdCluster::Kill(int member) {
  Signal(member, SIGKILL);
  Reap(member);
}

void EtcdCluster::Terminate(int member) {
  Signal(member, SIGTERM);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (running(member) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (running(member)) Kill(member);
}

void EtcdCluster::Pause(int member) {
  Signal(member, SIGSTOP);
  // SIGSTOP takes effect asynchronously (signal(7)): until every thread of
  // the member is stopped (state T in /proc/PID/task/TID/stat) it may still
  // answer a call or two. Wait up to 5 s for that.
  const std::filesystem::path tasks = "/proc/" + std::to_string(members_.at(member).pid) + "/task";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < give_up) {
    bool all_stopped = true;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
      std::ifstream in(task.path() / "stat");
      std::string line;
      std::getline(in, line);
      const std::optional<ProcStat> stat = ParseProcStat(line);  // A task's stat reads as a process's.
      if (stat && stat->state != 'T' && stat->state != 't') {
        all_stopped = false;
        break;
      }
    }
    if (!ec && all_stopped) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("etcd fixture: member " + std::to_string(member) + " did not stop within 5 s of SIGSTOP");
}
void EtcdCluster::Resume(int member) { Signal(member, SIGCONT); }

void EtcdCluster::Restart(int member) {
  if (running(member)) throw std::runtime_error("etcd fixture: Restart of a running member");
  Launch(members_.at(member));  // The data dir exists: etcd ignores the --initial-* flags.
  WaitHealthy(member);
}

void EtcdCluster::Wipe(int member) {
  if (running(member)) Kill(member);
  std::error_code ec;
  std::filesystem::remove_all(members_.at(member).data_dir, ec);
  Launch(members_.at(member));
  WaitHealthy(member);
}

void EtcdCluster::WaitHealthy(int member, std::chrono::milliseconds timeout) {
  auto client = ClientFor(endpoint(member));
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < give_up) {
    if (!running(member)) throw std::runtime_error("etcd fixture: member " + std::to_string(member) + " exited");
    const absl::Status health = client->CheckHealth();
    if (health.ok()) return;
    last = std::string(health.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("etcd fixture: member " + std::to_string(member) + " not healthy: " + last +
                           "; its log ends:\n" + LogTail(member, 8));
}

int EtcdCluster::Leader() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < size(); ++i) {
      if (!running(i)) continue;
      const auto status = ClientFor(endpoint(i))->Status(endpoint(i));
      if (status.ok() && status->is_leader()) return i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("etcd fixture: no member leads");
}

std::string EtcdCluster::LogTail(int member, int lines) const {
  if (member >= size()) return "";
  std::ifstream in(members_[member].log_file);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const std::string& line : tail) out += line + "\n";
  return out;
}

void EtcdCluster::KillAll() {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].pid > 0) {
      ::kill(members_[i].pid, SIGKILL);
      Reap(i);
    }
  }
  for (const Member& m : members_) {
    std::error_code ignored;
    std::filesystem::remove_all(m.data_dir, ignored);
  }
}

}  // namespace tpud::testing
