// A real etcd cluster for tests: 1 or 3 members of Debian's /usr/bin/etcd
// (etcd-server 3.4.23) on loopback, each with a data dir in a temp dir, free
// ports, and short raft timers (--heartbeat-interval 50 --election-timeout
// 500, so a lease may be as short as 1 s and a leader is re-elected within
// about a second). Flags as etcd's docs run a local cluster
// (https://etcd.io/docs/v3.4/op-guide/clustering/#static).
//
// Ports: each launch binds port-0 sockets to find free ports, closes them
// just before starting etcd, and starts again on new ports (up to 3 times)
// when a member fails to come up (another process took a port). A restarted
// member keeps its ports, which its peers know it by.
//
// Members are child processes of the test; the destructor kills them
// (SIGKILL), reaps them and removes the data dirs. Failures throw
// std::runtime_error with the tail of the member's log.
//
// Thread-safety: one owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace tpud::testing {

class EtcdCluster {
 public:
  // Starts `members` (1 or 3) members and waits (up to 20 s) until each one
  // serves a linearizable read.
  explicit EtcdCluster(int members = 1);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // The member's client endpoint, "127.0.0.1:<port>".
  std::string endpoint(int member) const;
  std::vector<std::string> endpoints() const;
  pid_t pid(int member) const;
  // False once the member has exited (or was killed).
  bool running(int member);

  // SIGKILL, then reap.
  void Kill(int member);
  // SIGTERM, then reap (SIGKILL after 10 s).
  void Terminate(int member);
  // SIGSTOP / SIGCONT: the member stops answering but keeps its sockets open.
  void Pause(int member);
  void Resume(int member);
  // Starts a killed or terminated member again with its data dir and ports;
  // waits until it serves a linearizable read.
  void Restart(int member);
  // A one-member cluster loses everything: SIGKILL, its data dir removed,
  // started again empty (revision 1, no keys, no leases) on the same port.
  void Wipe(int member);

  // The index of the member that leads now, by Maintenance.Status of the
  // running members; waits up to 10 s for one to lead.
  int Leader();
  // Waits up to `timeout` until `member` serves a linearizable read.
  void WaitHealthy(int member, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // The last `lines` lines of the member's log.
  std::string LogTail(int member, int lines = 20) const;

 private:
  struct Member {
    std::string name;
    std::string data_dir;
    std::string log_file;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };

  bool TryStart(int members);
  void Launch(Member& member);
  std::string InitialCluster() const;
  void KillAll();
  void Reap(int member);
  void Signal(int member, int signal) const;

  TempDir dir_{"tpud-etcd"};
  std::string token_;
  std::string start_error_;  // Why the last TryStart failed.
  std::vector<Member> members_;
};

}  // namespace tpud::testing
