// Fan-out of items (events, log lines) from the loop thread to readers on
// other threads (gRPC streams), each with a bounded queue: a slow reader
// loses items (and is told how many), it never blocks the publisher.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tpud {

// One reader's queue. Thread-safety: Push from the publisher thread, Pop from
// the reader's thread; all methods are thread-safe.
template <typename T>
class FanoutQueue {
 public:
  FanoutQueue(std::string job, std::size_t max_cost) : job_(std::move(job)), max_cost_(max_cost) {}

  const std::string& job() const { return job_; }

  // Adds `item` unless the queue already holds `max_cost` worth of items, in
  // which case the item is counted as dropped.
  void Push(const T& item, std::size_t cost) {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    if (cost_ + cost > max_cost_ && !items_.empty()) {
      dropped_ += cost;
      return;
    }
    items_.emplace_back(item, cost);
    cost_ += cost;
  }

  // Waits up to `timeout` for an item. nullopt on timeout or once closed and empty.
  std::optional<T> Pop(std::chrono::milliseconds timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &FanoutQueue::Ready), absl::FromChrono(timeout));
    if (items_.empty()) return std::nullopt;
    auto [item, cost] = std::move(items_.front());
    items_.pop_front();
    cost_ -= cost;
    return std::move(item);
  }

  // Cost dropped since the last call.
  std::uint64_t TakeDropped() {
    absl::MutexLock lock(&mu_);
    return std::exchange(dropped_, 0);
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_ && items_.empty();
  }

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !items_.empty() || closed_; }

  const std::string job_;  // Empty: every job.
  const std::size_t max_cost_;
  mutable absl::Mutex mu_;
  std::deque<std::pair<T, std::size_t>> items_ ABSL_GUARDED_BY(mu_);
  std::size_t cost_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// The set of readers. Thread-safety: all methods are thread-safe.
template <typename T>
class Fanout {
 public:
  using Queue = FanoutQueue<T>;

  // A new reader of items for `job` (empty: all jobs).
  std::shared_ptr<Queue> Subscribe(const std::string& job, std::size_t max_cost) {
    auto queue = std::make_shared<Queue>(job, max_cost);
    absl::MutexLock lock(&mu_);
    if (closed_) queue->Close();
    readers_.push_back(queue);
    return queue;
  }

  void Publish(const std::string& job, const T& item, std::size_t cost) {
    absl::MutexLock lock(&mu_);
    for (auto it = readers_.begin(); it != readers_.end();) {
      std::shared_ptr<Queue> reader = it->lock();
      if (!reader) {
        it = readers_.erase(it);
        continue;
      }
      if (reader->job().empty() || reader->job() == job) reader->Push(item, cost);
      ++it;
    }
  }

  bool HasReaders() const {
    absl::MutexLock lock(&mu_);
    return !readers_.empty();
  }

  // Wakes and ends every reader (daemon shutdown).
  void CloseAll() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& weak : readers_) {
      if (auto reader = weak.lock()) reader->Close();
    }
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::weak_ptr<Queue>> readers_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tpud
