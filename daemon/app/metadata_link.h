// Connects the GCE metadata watcher (preemption, maintenance events) to the
// supervisor's event loop.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <mutex>
#include <thread>

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
  std::mutex mu_;
  bool stopped_ = false;                       // Guarded by mu_.
  std::unique_ptr<MetadataWatcher> watcher_;   // Guarded by mu_.
};

}  // namespace tpud
