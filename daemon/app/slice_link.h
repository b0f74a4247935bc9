// Wires a multi-host slice into the daemon (config `slice:`): resolves who
// this worker is, connects to etcd, and runs the slice coordinator
// (daemon/slice/coordinator.h) as Supervisor::Deps::gang. Commits and gang
// specs from the slice reach the supervisor on the loop; this worker's state
// of each gang job, and its newest state changes, are published every second
// for `tpuctl status` and `tpuctl events` elsewhere.
//
// Thread-safety: Start, Stop and PublishStatuses run on the daemon's loop
// thread; the coordinator has its own thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/config/config.h"
#include "daemon/etcd/grpc_etcd_client.h"
#include "daemon/gce/slice_identity.h"
#include "daemon/metrics/metrics.h"
#include "daemon/slice/coordinator.h"
#include "daemon/supervisor/supervisor.h"

namespace tpud {

class SliceLink {
 public:
  // Null without a `slice:` section. Errors: the identity cannot be
  // resolved (FailedPrecondition/InvalidArgument naming the sources), or the
  // etcd options are bad (InvalidArgument naming the endpoint or file). An
  // unreachable etcd is not an error: the coordinator keeps trying.
  static absl::StatusOr<std::unique_ptr<SliceLink>> Create(boost::asio::io_context& io, const DaemonConfig& config);
  ~SliceLink();

  // Sets deps->gang, worker_id and num_workers. The SliceLink must outlive
  // the Supervisor made with `deps`.
  void Wire(Supervisor::Deps* deps) const;
  // Starts following the slice; commits and specs go to `supervisor`.
  void Start(Supervisor& supervisor);
  // Stops the coordinator (its lease is kept for the next tpud to take over).
  void Stop();

  // The slice for /metrics; any thread.
  SliceMetrics Metrics() const;

  const SliceIdentity& identity() const { return identity_; }
  const slice::Coordinator& coordinator() const { return *coordinator_; }
  etcd::EtcdClient& etcd() const { return *etcd_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  SliceLink(boost::asio::io_context& io, const DaemonConfig& config) : io_(io), config_(config), timer_(io) {}
  void OnSpec(const std::string& job, const std::string& spec_yaml);
  void PublishStatuses();

  boost::asio::io_context& io_;
  const DaemonConfig& config_;
  SliceIdentity identity_;
  std::vector<std::string> endpoints_;
  std::unique_ptr<etcd::GrpcEtcdClient> etcd_;
  std::unique_ptr<slice::Coordinator> coordinator_;
  Supervisor* supervisor_ = nullptr;  // Set by Start, before the coordinator runs.
  boost::asio::steady_timer timer_;
};

}  // namespace tpud
