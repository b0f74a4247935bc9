// Wires incident bundles into the daemon: a worker thread that captures
// them (incident/bundle.h) off the event loop, behind
// Supervisor::Deps::capture_incident.
#pragma once

#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/config/config.h"
#include "daemon/incident/bundle.h"
#include "daemon/supervisor/supervisor.h"
#include "daemon/tpu/tpu_recovery.h"

namespace tpud {

// Captures one bundle at a time, in the order asked. A request that waited
// in the queue past its capture_seconds is captured without stacks (the
// ladder has moved on). At most kMaxQueued wait; more are dropped with a
// warning (a crash loop cannot pile up work).
// Thread-safety: Capture may be called from any thread; `done` runs on `io`.
class IncidentCapturer {
 public:
  static constexpr std::size_t kMaxQueued = 8;

  // `tpu` (may be null) supplies the node as last seen; it must outlive this.
  IncidentCapturer(boost::asio::io_context& io, incident::CaptureOptions options, const TpuRecovery* tpu);
  ~IncidentCapturer();  // Finishes the capture in progress, drops the rest, joins.
  IncidentCapturer(const IncidentCapturer&) = delete;
  IncidentCapturer& operator=(const IncidentCapturer&) = delete;

  void Capture(incident::CaptureRequest request, std::function<void()> done);

  // Sets deps->capture_incident and capture_seconds when config.incidents.capture.
  static std::unique_ptr<IncidentCapturer> Wire(boost::asio::io_context& io, const DaemonConfig& config,
                                                const TpuRecovery* tpu, Supervisor::Deps* deps);

 private:
  struct Queued {
    incident::CaptureRequest request;
    std::function<void()> done;
    std::chrono::steady_clock::time_point queued;
  };
  void Run();
  std::string DescribeTpu() const;

  boost::asio::io_context& io_;
  const incident::CaptureOptions options_;
  const TpuRecovery* tpu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // Guarded by mu_.
  bool stopping_ = false;     // Guarded by mu_.
  std::thread worker_;
};

}  // namespace tpud
