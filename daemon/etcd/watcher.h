// Watcher over etcd's bidirectional Watch stream: one stream, one watch on it.
//
// Resuming: the watcher remembers next_revision, one past the last event it
// delivered (or, for a watch started at "now", past its created response's
// header.revision; or past a progress notification's header.revision, since
// it asks for progress_notify). After a broken stream it creates the watch
// again from next_revision on the next endpoint, with a backoff (25 ms
// doubling to 1 s), until stopped; events older than next_revision are
// dropped should a member send them again. Why only those revisions are safe
// resume points: etcd_client.h, "Watch".
//
// Thread-safety: as Watcher (etcd_client.h).
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/etcd/endpoints.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/etcd/stop_control.h"

namespace tpud::etcd {

class GrpcWatcher final : public Watcher {
 public:
  GrpcWatcher(std::shared_ptr<EndpointPool> pool, WatchOptions options, Callback callback);
  ~GrpcWatcher() override;
  GrpcWatcher(const GrpcWatcher&) = delete;
  GrpcWatcher& operator=(const GrpcWatcher&) = delete;

  // Starts the thread and waits, up to the request timeout, until etcd has
  // created the watch. On failure the watcher is stopped and the status says
  // why (the last attempt's error; FAILED_PRECONDITION when etcd refused it).
  // Call once.
  absl::Status Start();

  int64_t next_revision() const override { return next_revision_.load(); }
  bool connected() const override { return connected_.load(); }
  bool running() const override;
  void Stop() override;

 private:
  void Run();
  // One stream at member `index` until it breaks (its error) or the watch
  // ends or stops (OK).
  absl::Status RunStream(std::size_t index);
  // Takes one response; true when the watch has ended.
  bool Handle(const etcdserverpb::WatchResponse& response, const std::string& endpoint);
  void DeliverEvents(const etcdserverpb::WatchResponse& response);
  // Ends the watch with `update` (kCompacted, kCanceled), or with `error`
  // when it was never created.
  void End(const WatchUpdate& update, const absl::Status& error);
  etcdserverpb::WatchRequest CreateRequest() const;
  bool CreatedOrEnded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return created_ || !running_; }

  const std::shared_ptr<EndpointPool> pool_;
  const WatchOptions options_;
  const Callback callback_;
  std::atomic<int64_t> next_revision_;  // <= 0 until created, when the watch starts at "now".
  std::atomic<bool> connected_{false};
  std::chrono::milliseconds backoff_;  // Watcher thread only.
  int failures_ = 0;                   // Watcher thread only: streams broken since the last creation.
  mutable absl::Mutex mu_;
  bool created_ ABSL_GUARDED_BY(mu_) = false;  // etcd created the watch once.
  bool running_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);  // Why the last stream broke or the watch ended.
  StopControl control_;
  absl::Mutex join_mu_;  // Held while joining thread_.
  std::thread thread_;
};

}  // namespace tpud::etcd
