// Prometheus metrics: built from job snapshots at scrape time, served by
// prometheus-cpp's Exposer (the only file that includes prometheus-cpp).
//
// Families (names follow Prometheus naming: tpud_<noun>_<unit>):
//   tpud_build_info{version}                      gauge, always 1
//   tpud_job_state{job,state}                     gauge, 1 for the current state, 0 otherwise
//   tpud_job_attempts_total{job}                  counter, attempts launched
//   tpud_job_restarts_total{job,reason}           counter, automatic restarts by failure class
//   tpud_job_failures_total{job,class}            counter, failed attempts by failure class
//   tpud_job_uptime_seconds{job}                  gauge, of the current attempt (0 if none)
//   tpud_job_checkpoint_step{job}                 gauge, step of the checkpoint last resumed from
//   tpud_job_last_exit_code{job}                  gauge, -1 when killed by a signal
//   tpud_job_last_exit_signal{job}                gauge, 0 when it exited
//   tpud_job_log_dropped_bytes_total{job}         counter, output the job log could not write
//   tpud_state_store_healthy                      gauge, 1 while the state store takes writes
//   tpud_state_store_errors_total                 counter, failed state store writes
//   tpud_tpu_resets_total{backend,result}         counter, TPU recovery actions by result (ok, failed)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/supervisor/supervisor.h"

namespace prometheus {
struct MetricFamily;
class Exposer;
}  // namespace prometheus

namespace tpud {

// What a scrape reports, taken on the event loop.
// A multi-host slice as the metrics show it (daemon/slice/coordinator.h View).
struct SliceMetrics {
  bool etcd_up = false;
  bool leader = false;                                 // This worker leads the slice.
  int workers_up = 0;                                  // Members with a live lease...
  int workers_lost = 0;                                // ...and expected ones without.
  std::map<std::string, std::int64_t> gang_generation;  // By job.
  // (job, failure class) -> the gang's counted restarts (the committed
  // restarts_by_reason; a person's start or restart begins afresh).
  std::map<std::pair<std::string, std::string>, std::int64_t> gang_restarts;
};

struct MetricsInput {
  std::vector<JobSnapshot> jobs;
  StoreHealth store;
  // (backend, result) -> TPU resets since tpud started (TpuRecoveryStatus::
  // resets_total); empty without a TPU reset backend.
  std::map<std::pair<std::string, std::string>, std::int64_t> tpu_resets;
  std::optional<SliceMetrics> slice;  // With a `slice:` section.
};

// Pure: the families for these snapshots.
std::vector<prometheus::MetricFamily> BuildMetricFamilies(const MetricsInput& input, const std::string& version);

// Serves /metrics over HTTP. Thread-safety: `snapshot` is called on the
// HTTP server's threads; it must be safe to call from any thread until the
// MetricsServer is destroyed.
class MetricsServer {
 public:
  // Listens on `listen` ("host:port"; port 0 picks a free port). Errors:
  // Unavailable when the address cannot be bound, naming it.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, std::function<MetricsInput()> snapshot, std::string version);
  ~MetricsServer();

  // "127.0.0.1:9464", with the port actually bound.
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<void> collector_;
  std::string address_;
};

}  // namespace tpud
