#include "daemon/gce/metadata_watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace tpud {

struct MetadataWatcher::Watch {
  std::string key;
  HttpCancel cancel;
  std::thread thread;
  // Owned by the thread:
  std::optional<std::string> etag;   // Set after the first successful poll.
  std::optional<std::string> value;  // The last value reported.
  int failures = 0;                  // Consecutive failed polls.
};

MetadataWatcher::MetadataWatcher(std::shared_ptr<const MetadataClient> client, OnChange on_change,
                                 MetadataWatcherOptions options)
    : client_(std::move(client)), on_change_(std::move(on_change)), options_(std::move(options)) {}

MetadataWatcher::~MetadataWatcher() { Stop(); }

void MetadataWatcher::Start() {
  for (const std::string& key : options_.keys) {
    auto watch = std::make_unique<Watch>();
    watch->key = key;
    watches_.push_back(std::move(watch));
  }
  for (auto& watch : watches_) watch->thread = std::thread([this, w = watch.get()] { Run(*w); });
}

void MetadataWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& watch : watches_) watch->cancel.Cancel();
  for (auto& watch : watches_) {
    if (watch->thread.joinable()) watch->thread.join();
  }
}

bool MetadataWatcher::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool MetadataWatcher::SleepUnlessStopped(Seconds delay) {
  absl::MutexLock lock(&mu_);
  const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(delay);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(timeout));
}

void MetadataWatcher::Run(Watch& w) {
  Seconds backoff = options_.backoff_initial;
  while (!stopping()) {
    absl::StatusOr<MetadataValue> result =
        w.etag ? client_->WaitForChange(w.key, *w.etag, options_.timeout_sec, &w.cancel)
               : client_->Get(w.key, &w.cancel);
    if (stopping()) return;
    if (!result.ok()) {
      if (w.failures++ == 0) {
        spdlog::warn("metadata watch {}: {} (retrying every {}s at most)", w.key, result.status().ToString(),
                     options_.backoff_max.count());
      }
      if (!SleepUnlessStopped(backoff)) return;
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    if (w.failures > 0) spdlog::info("metadata watch {}: recovered after {} failed polls", w.key, w.failures);
    w.failures = 0;
    backoff = options_.backoff_initial;
    w.etag = std::move(result->etag);
    if (w.value != result->value) {
      w.value = std::move(result->value);
      on_change_(w.key, *w.value);
    }
  }
}

}  // namespace tpud
