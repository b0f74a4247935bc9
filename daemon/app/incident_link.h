// Wires incident bundles into the daemon: a worker thread that captures
// them (incident/bundle.h) off the event loop, behind
// Supervisor::Deps::capture_incident.
#pragma once

#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/config/config.h"
#include "daemon/incident/bundle.h"
#include "daemon/supervisor/supervisor.h"
#include "daemon/tpu/tpu_recovery.h"

namespace tpud {

// Captures one bundle at a time, in the order asked. A request that waited
// in the queue past its capture_seconds is captured without stacks (the
// ladder has moved on). At most kMaxQueued wait; more are dropped with a
// warning (a crash loop cannot pile up work).
// Thread-safety: Capture and Retire may be called from any thread; `done`
// runs on `io`.
class IncidentCapturer {
 public:
  static constexpr std::size_t kMaxQueued = 8;
  // How long the destructor waits for the capture in progress.
  static constexpr std::chrono::seconds kShutdownWait{2};

  // `tpu` (may be null) supplies the node as last seen; it must outlive this.
  IncidentCapturer(boost::asio::io_context& io, incident::CaptureOptions options, const TpuRecovery* tpu);
  // Drops the queued captures and waits up to kShutdownWait for the one in
  // progress; a capture still stuck then (a read of a process wedged in the
  // kernel) is left to finish on its own, logged, so it cannot hold tpud's
  // exit. Its `done` is never run.
  ~IncidentCapturer();
  IncidentCapturer(const IncidentCapturer&) = delete;
  IncidentCapturer& operator=(const IncidentCapturer&) = delete;

  void Capture(incident::CaptureRequest request, std::function<void()> done);
  // After the captures already asked, moves the job's bundles aside
  // (DIR/JOB to DIR/JOB.removed-UNIXMS), so a new job of the same name starts
  // again at bundle 1 without touching them. For a removed job. They are
  // removed after incidents.removed_keep_days, or sooner under
  // incidents.max_bytes (incident/retention.h).
  void Retire(const std::string& job);

  // Sets deps->capture_incident, retire_incidents and capture_seconds when
  // config.incidents.capture.
  static std::unique_ptr<IncidentCapturer> Wire(boost::asio::io_context& io, const DaemonConfig& config,
                                                const TpuRecovery* tpu, Supervisor::Deps* deps);

 private:
  struct Queued {
    incident::CaptureRequest request;
    std::function<void()> done;
    std::chrono::steady_clock::time_point deadline;  // The Job sends its stop signal then at the latest.
    std::string retire;                              // Set: a Retire of this job instead of a capture.
  };
  // Shared by the worker thread, which may outlive this object (see the destructor).
  struct Shared {
    absl::Mutex mu;
    std::deque<Queued> queue ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    bool exited ABSL_GUARDED_BY(mu) = false;                   // The worker returned.
    boost::asio::io_context* io ABSL_GUARDED_BY(mu) = nullptr;  // Null once abandoned.
    bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping || !queue.empty(); }
  };
  static void Run(const std::shared_ptr<Shared>& shared, const incident::CaptureOptions& options);
  static void RetireNow(const incident::CaptureOptions& options, const std::string& job);
  // Removes what options.retention no longer keeps, never `captured`; logs each.
  static void KeepWithinBounds(const incident::CaptureOptions& options, const std::filesystem::path& captured);
  void Enqueue(Queued queued);
  std::string DescribeTpu() const;

  const incident::CaptureOptions options_;
  const TpuRecovery* tpu_;
  std::shared_ptr<Shared> shared_;
  std::thread worker_;
};

}  // namespace tpud
