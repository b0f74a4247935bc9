// What a keepalive or watch thread and its owner share to stop it promptly:
// the stop flag, the stream in progress (cancelled on stop, so a blocked read
// returns at once), and sleeps that a stop cuts short.
//
// Thread-safety: thread-safe.
#pragma once

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/etcd/endpoints.h"

namespace tpud::etcd {

class StopControl {
 public:
  bool stopping() const;
  // Sets the flag and cancels the registered stream, if any.
  void RequestStop();
  // Registers what cancels the current stream; false (nothing registered)
  // when already stopping. Unregister() before the stream is destroyed.
  bool Register(std::function<void()> cancel);
  void Unregister();
  // Sleeps until `until` or a stop request; false when stopping.
  bool SleepUntil(Deadline until);

 private:
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> cancel_ ABSL_GUARDED_BY(mu_);
};

// Joins `thread` unless called on it (a callback stopping its own worker);
// several threads may call it at once.
void JoinUnlessSelf(std::thread& thread, absl::Mutex& join_mu);

}  // namespace tpud::etcd
