#include "daemon/app/metadata_link.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

namespace tpud {

MetadataLink::MetadataLink(const GceMetadataConfig& config, boost::asio::io_context& io,
                           Supervisor& supervisor)
    : io_(io), supervisor_(supervisor) {
  if (config.enabled == "false") return;
  client_ = std::make_shared<MetadataClient>(MetadataBaseUrl(config.host));
  if (config.enabled == "true") {
    StartWatching();
    return;
  }
  prober_ = std::thread([this] {
    if (absl::Status s = client_->Probe(); !s.ok()) {
      spdlog::debug("GCE metadata server not found ({}): not watching for maintenance events",
                    std::string(s.message()));
      return;
    }
    StartWatching();
  });
}

void MetadataLink::StartWatching() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  spdlog::info("watching {} for preemption and maintenance events", client_->base_url());
  watcher_ = std::make_unique<MetadataWatcher>(
      client_, [this](const std::string& key, const std::string& value) {
        boost::asio::post(io_, [this, key, value] { supervisor_.OnMetadataChange(key, value); });
      });
  watcher_->Start();
}

MetadataLink::~MetadataLink() {
  std::unique_ptr<MetadataWatcher> watcher;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    watcher = std::move(watcher_);
  }
  if (watcher) watcher->Stop();
  if (prober_.joinable()) prober_.join();
}

}  // namespace tpud
