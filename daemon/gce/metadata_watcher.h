// Watches metadata keys (preemption, maintenance events) with long polls and
// reports their values.
//
// One thread per key runs: Get (the initial value and etag), then
// WaitForChange(etag, timeout_sec) in a loop. Failures (503 during host
// maintenance, connection errors, timeouts, even 404) are retried forever with
// exponential backoff from backoff_initial to backoff_max; the etag is kept, so
// a change during an outage is reported on recovery. A streak of failures is
// logged once (warn) and its end once (info). Source for the protocol (wait-for-
// change, ETag): https://cloud.google.com/compute/docs/metadata/querying-metadata.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/gce/metadata_client.h"

namespace tpud {

struct MetadataWatcherOptions {
  std::vector<std::string> keys = {kPreemptedKey, kMaintenanceEventKey};
  int timeout_sec = 60;          // Long-poll length asked of the server (>= 1).
  Seconds backoff_initial{1.0};  // First retry delay after a failure.
  Seconds backoff_max{30.0};     // The delay doubles up to this.
};

// Thread-safety: Start, Stop and the destructor belong to one owner thread.
// `on_change` runs on the watcher threads: for different keys possibly at the
// same time, for one key never concurrently; it must be thread-safe (post to
// the event loop) and must not call Stop.
class MetadataWatcher {
 public:
  // Called with the key's first value, then whenever a poll returns a value
  // different from the last one reported (a long poll that times out with the
  // same value is not reported).
  using OnChange = std::function<void(const std::string& key, const std::string& value)>;

  // `client` must outlive the watcher (shared to make that easy).
  MetadataWatcher(std::shared_ptr<const MetadataClient> client, OnChange on_change,
                  MetadataWatcherOptions options = {});
  ~MetadataWatcher();  // Stop().
  MetadataWatcher(const MetadataWatcher&) = delete;
  MetadataWatcher& operator=(const MetadataWatcher&) = delete;

  // Starts one thread per key. Call at most once.
  void Start();
  // Aborts requests in flight and backoff waits, and joins the threads; after
  // it returns `on_change` is not called again. Returns within milliseconds
  // unless `on_change` is slow. Idempotent; the watcher cannot be restarted.
  void Stop();

 private:
  struct Watch;
  void Run(Watch& watch);
  bool SleepUnlessStopped(Seconds delay);
  bool stopping() const;

  std::shared_ptr<const MetadataClient> client_;
  OnChange on_change_;
  MetadataWatcherOptions options_;
  std::vector<std::unique_ptr<Watch>> watches_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tpud
