#include "daemon/etcd/stop_control.h"

#include <utility>

#include "absl/time/time.h"

namespace tpud::etcd {

bool StopControl::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void StopControl::RequestStop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (cancel_) cancel_();
}

bool StopControl::Register(std::function<void()> cancel) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  cancel_ = std::move(cancel);
  return true;
}

void StopControl::Unregister() {
  absl::MutexLock lock(&mu_);
  cancel_ = nullptr;
}

bool StopControl::SleepUntil(Deadline until) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
  absl::MutexLock lock(&mu_);
  if (left.count() > 0) mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(left));
  return !stopping_;
}

void JoinUnlessSelf(std::thread& thread, absl::Mutex& join_mu) {
  // Checked before locking: the worker, stopping itself from a callback while
  // its owner joins it, must not wait for the owner's lock. (The worker reads
  // the id before it ends; join() clears it only after.)
  if (thread.get_id() == std::this_thread::get_id()) return;
  absl::MutexLock lock(&join_mu);
  if (thread.joinable()) thread.join();
}

}  // namespace tpud::etcd
