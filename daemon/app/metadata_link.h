// Connects the GCE metadata watcher (preemption, maintenance events) to the
// supervisor's event loop.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/config/config.h"
#include "daemon/gce/metadata_watcher.h"
#include "daemon/supervisor/supervisor.h"

namespace tpud {

// enabled: false does nothing; true watches at once (the watcher retries
// forever); auto first probes the server once, quietly, off the loop thread,
// and watches only if it answers (so tpud off GCE starts as fast as on it).
// Changes are posted to `io` and handed to Supervisor::OnMetadataChange.
// Thread-safety: construct and destroy on one thread; destroy before `io`.
class MetadataLink {
 public:
  MetadataLink(const GceMetadataConfig& config, boost::asio::io_context& io, Supervisor& supervisor);
  ~MetadataLink();
  MetadataLink(const MetadataLink&) = delete;
  MetadataLink& operator=(const MetadataLink&) = delete;

 private:
  void StartWatching();

  boost::asio::io_context& io_;
  Supervisor& supervisor_;
  std::shared_ptr<const MetadataClient> client_;
  std::thread prober_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<MetadataWatcher> watcher_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tpud
