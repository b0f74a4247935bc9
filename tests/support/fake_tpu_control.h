// A scripted TpuControl: Describe answers from a queue of nodes (then the last
// one), Reset and Start return set statuses and move a FakeWaitClock forward
// by a set duration; every call is logged. Reset can be held at a gate until
// the test opens it (or the call is cancelled).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/tpu/tpu_control.h"
#include "tests/support/fake_wait_clock.h"

namespace tpud::testing {

// Thread-safety: every member is locked; tests read the log after the
// recovery's `done` ran (posted through the io_context, so ordered after).
class FakeTpuControl final : public TpuControl {
 public:
  FakeTpuControl(std::string name, FakeWaitClock* clock) : name_(std::move(name)), clock_(clock) {
    node_.state = kNodeReady;
    node_.health = kNodeHealthy;
  }

  absl::StatusOr<TpuNode> Describe(CancelToken* cancel) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back("describe");
    if (!describe_status_.ok()) return describe_status_;
    if (!nodes_.empty()) {
      node_ = nodes_.front();
      nodes_.pop_front();
    }
    return node_;
  }
  absl::Status Reset(const TpuCall& call) override {
    std::unique_lock<std::mutex> lock(mu_);
    calls_.push_back("reset");
    spare_pgids_ = call.spare_pgids;
    entered_ = true;
    gate_cv_.notify_all();
    // Cancellation is only polled (a waker would invert the lock order).
    while (!gate_open_ && !(call.cancel && call.cancel->cancelled())) {
      gate_cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    if (call.cancel && call.cancel->cancelled()) return absl::CancelledError("reset cancelled");
    clock_->AdvanceSeconds(reset_seconds_);
    node_.state = kNodeReady;
    node_.health = kNodeHealthy;
    return reset_status_;
  }
  absl::Status Start(const TpuCall& call) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back("start");
    clock_->AdvanceSeconds(reset_seconds_);
    node_.state = kNodeReady;
    return start_status_;
  }
  std::string name() const override { return name_; }

  // Script.
  void SetNode(const std::string& state, const std::string& health) {
    std::lock_guard<std::mutex> lock(mu_);
    node_.state = state;
    node_.health = health;
  }
  void QueueNode(const std::string& state, const std::string& health) {
    std::lock_guard<std::mutex> lock(mu_);
    TpuNode node;
    node.state = state;
    node.health = health;
    nodes_.push_back(node);
  }
  void SetDescribeStatus(absl::Status s) { std::lock_guard<std::mutex> l(mu_); describe_status_ = std::move(s); }
  void SetResetStatus(absl::Status s) { std::lock_guard<std::mutex> l(mu_); reset_status_ = std::move(s); }
  void SetResetSeconds(double s) { std::lock_guard<std::mutex> l(mu_); reset_seconds_ = s; }
  // Close the gate: Reset waits at it until OpenGate or cancellation.
  void CloseGate() { std::lock_guard<std::mutex> l(mu_); gate_open_ = false; entered_ = false; }
  void OpenGate() {
    { std::lock_guard<std::mutex> l(mu_); gate_open_ = true; }
    gate_cv_.notify_all();
  }
  // Blocks until a Reset has reached the gate.
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    gate_cv_.wait(lock, [&] { return entered_; });
  }

  // Log.
  std::vector<std::string> calls() { std::lock_guard<std::mutex> l(mu_); return calls_; }
  std::vector<int> spare_pgids() { std::lock_guard<std::mutex> l(mu_); return spare_pgids_; }
  int Count(const std::string& call) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const std::string& c : calls_) n += c == call;
    return n;
  }

 private:
  const std::string name_;
  FakeWaitClock* clock_;
  std::mutex mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = true;
  bool entered_ = false;
  TpuNode node_;
  std::deque<TpuNode> nodes_;
  absl::Status describe_status_, reset_status_, start_status_;
  double reset_seconds_ = 0;
  std::vector<std::string> calls_;
  std::vector<int> spare_pgids_;
};

}  // namespace tpud::testing
