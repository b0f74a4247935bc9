// Helpers shared by the etcd tests: client options for a test cluster,
// polling for a condition, and a thread-safe log of watch updates.
//
// Thread-safety: UpdateLog is thread-safe; the rest are plain functions.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/etcd/grpc_etcd_client.h"
#include "tests/support/etcd_cluster.h"

namespace tpud::etcd::testing {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// Options for `endpoints` with test-sized timeouts.
inline ClientOptions OptionsFor(std::vector<std::string> endpoints, Ms request_timeout = 5000ms) {
  ClientOptions options;
  options.endpoints = std::move(endpoints);
  options.dial_timeout = 1000ms;
  options.request_timeout = request_timeout;
  return options;
}

inline std::unique_ptr<GrpcEtcdClient> Connect(std::vector<std::string> endpoints, Ms request_timeout = 5000ms) {
  auto client = GrpcEtcdClient::Create(OptionsFor(std::move(endpoints), request_timeout));
  if (!client.ok()) throw std::runtime_error(std::string(client.status().message()));
  return *std::move(client);
}

// Calls `predicate` every 20 ms until it holds (true) or `timeout` passes (false).
inline bool WaitUntil(const std::function<bool()>& predicate, Ms timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Records what a watcher delivers.
class UpdateLog {
 public:
  Watcher::Callback Callback() {
    return [this](const WatchUpdate& update) {
      std::lock_guard<std::mutex> lock(mu_);
      updates_.push_back(update);
    };
  }
  std::vector<WatchUpdate> updates() const {
    std::lock_guard<std::mutex> lock(mu_);
    return updates_;
  }
  // Every event delivered so far, in order.
  std::vector<WatchEvent> events() const {
    std::vector<WatchEvent> out;
    for (const WatchUpdate& u : updates()) out.insert(out.end(), u.events.begin(), u.events.end());
    return out;
  }
  bool WaitForEvents(std::size_t count, Ms timeout = 10000ms) const {
    return WaitUntil([&] { return events().size() >= count; }, timeout);
  }
  bool WaitForKind(WatchUpdate::Kind kind, Ms timeout = 10000ms) const {
    return WaitUntil(
        [&] {
          for (const WatchUpdate& u : updates()) {
            if (u.kind == kind) return true;
          }
          return false;
        },
        timeout);
  }

 private:
  mutable std::mutex mu_;
  std::vector<WatchUpdate> updates_;
};

}  // namespace tpud::etcd::testing
