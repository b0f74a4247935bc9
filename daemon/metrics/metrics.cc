#include "daemon/metrics/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void Add(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

class SnapshotCollector final : public prometheus::Collectable {
 public:
  SnapshotCollector(std::function<MetricsInput()> snapshot, std::string version)
      : snapshot_(std::move(snapshot)), version_(std::move(version)) {}
  std::vector<MetricFamily> Collect() const override {
    return BuildMetricFamilies(snapshot_(), version_);
  }

 private:
  std::function<MetricsInput()> snapshot_;
  std::string version_;
};

void AddSliceFamilies(const SliceMetrics& slice, std::vector<MetricFamily>& families) {
  MetricFamily etcd_up = Family("tpud_etcd_up", "1 while this tpud reaches etcd (the slice's coordination).",
                                MetricType::Gauge);
  Add(etcd_up, {}, slice.etcd_up ? 1 : 0);
  MetricFamily leader = Family("tpud_slice_leader", "1 while this worker leads the slice.", MetricType::Gauge);
  Add(leader, {}, slice.leader ? 1 : 0);
  MetricFamily workers = Family("tpud_slice_workers",
                                "The slice's workers as this tpud sees them: up (a live lease) or lost.",
                                MetricType::Gauge);
  Add(workers, {{"state", "up"}}, slice.workers_up);
  Add(workers, {{"state", "lost"}}, slice.workers_lost);
  MetricFamily generation = Family("tpud_gang_generation", "The gang's committed generation.", MetricType::Gauge);
  for (const auto& [job, value] : slice.gang_generation) Add(generation, {{"job", job}}, static_cast<double>(value));
  MetricFamily restarts = Family("tpud_gang_restarts_total",
                                 "The gang's counted restarts, by the failure class that caused them.",
                                 MetricType::Counter);
  for (const auto& [key, count] : slice.gang_restarts) {
    Add(restarts, {{"job", key.first}, {"class", key.second}}, static_cast<double>(count));
  }
  for (MetricFamily* family : {&etcd_up, &leader, &workers, &generation, &restarts}) {
    families.push_back(std::move(*family));
  }
}

}  // namespace

std::vector<MetricFamily> BuildMetricFamilies(const MetricsInput& input, const std::string& version) {
  const std::vector<JobSnapshot>& jobs = input.jobs;
  MetricFamily build = Family("tpud_build_info", "tpud build; the value is always 1.", MetricType::Gauge);
  Add(build, {{"version", version}}, 1);
  MetricFamily state = Family("tpud_job_state", "1 for the job's current state, 0 for the others.",
                              MetricType::Gauge);
  MetricFamily attempts = Family("tpud_job_attempts_total", "Attempts launched.", MetricType::Counter);
  MetricFamily restarts = Family("tpud_job_restarts_total",
                                 "Automatic restarts, by what ended the failed attempt.",
                                 MetricType::Counter);
  MetricFamily failures = Family("tpud_job_failures_total", "Failed attempts, by failure class.",
                                 MetricType::Counter);
  MetricFamily uptime = Family("tpud_job_uptime_seconds", "Uptime of the current attempt.",
                               MetricType::Gauge);
  MetricFamily step = Family("tpud_job_checkpoint_step",
                             "Step of the newest complete checkpoint found at the last attempt start.",
                             MetricType::Gauge);
  MetricFamily exit_code = Family("tpud_job_last_exit_code",
                                  "Exit code of the last attempt; -1 when killed by a signal.",
                                  MetricType::Gauge);
  MetricFamily exit_signal = Family("tpud_job_last_exit_signal",
                                    "Signal that ended the last attempt; 0 when it exited.",
                                    MetricType::Gauge);
  // Goodput (daemon/supervisor/goodput.h): gauges, since a running attempt's
  // progress counts as productive until the next attempt shows what was kept.
  MetricFamily goodput = Family("tpud_job_goodput_ratio",
                                "Productive seconds / wall seconds the job was wanted running.",
                                MetricType::Gauge);
  MetricFamily productive = Family("tpud_job_productive_seconds",
                                   "Seconds of training progress the job kept.", MetricType::Gauge);
  MetricFamily badput = Family("tpud_job_badput_seconds",
                               "Seconds of wall time without kept progress, by cause: startup, "
                               "checkpoint_restore, wasted_progress, recovery, hang_detection.",
                               MetricType::Gauge);
  MetricFamily log_dropped = Family("tpud_job_log_dropped_bytes_total",
                                    "Output the job log could not write (a full disk), all attempts.",
                                    MetricType::Counter);
  MetricFamily store_healthy = Family("tpud_state_store_healthy",
                                      "1 while the state store takes writes; 0 after a write failed.",
                                      MetricType::Gauge);
  Add(store_healthy, {}, input.store.ok ? 1 : 0);
  MetricFamily store_errors = Family("tpud_state_store_errors_total", "Failed state store writes.",
                                     MetricType::Counter);
  Add(store_errors, {}, static_cast<double>(input.store.errors_total));
  MetricFamily tpu_resets = Family("tpud_tpu_resets_total",
                                   "TPU resets (and node starts, maintenance waits) finished, by the backend "
                                   "that ran them and result: ok or failed (also when the budget refused one).",
                                   MetricType::Counter);
  for (const auto& [key, count] : input.tpu_resets) {
    Add(tpu_resets, {{"backend", key.first}, {"result", key.second}}, static_cast<double>(count));
  }
  for (const JobSnapshot& job : jobs) {
    Add(log_dropped, {{"job", job.name}}, static_cast<double>(job.log_dropped_bytes));
    if (const std::optional<double> ratio = job.goodput.ratio()) Add(goodput, {{"job", job.name}}, *ratio);
    Add(productive, {{"job", job.name}}, job.goodput.productive.count());
    for (BadputCause cause : kAllBadputCauses) {
      Add(badput, {{"job", job.name}, {"cause", std::string(BadputCauseName(cause))}},
          job.goodput.badput_of(cause).count());
    }
    for (JobState s : kAllJobStates) {
      Add(state, {{"job", job.name}, {"state", std::string(JobStateName(s))}}, job.state == s ? 1 : 0);
    }
    Add(attempts, {{"job", job.name}}, static_cast<double>(job.attempts_total));
    for (const auto& [reason, count] : job.restarts_by_reason) {
      Add(restarts, {{"job", job.name}, {"reason", reason}}, static_cast<double>(count));
    }
    for (const auto& [failure_class, count] : job.failures_by_class) {
      Add(failures, {{"job", job.name}, {"class", failure_class}}, static_cast<double>(count));
    }
    Add(uptime, {{"job", job.name}}, job.uptime.count());
    if (job.checkpoint) Add(step, {{"job", job.name}}, static_cast<double>(job.checkpoint->step));
    if (job.last_exit) {
      Add(exit_code, {{"job", job.name}}, job.last_exit->code);
      Add(exit_signal, {{"job", job.name}}, job.last_exit->signal);
    }
  }
  std::vector<MetricFamily> families = {build,       state,   attempts,   restarts, failures,
                                        uptime,      step,    exit_code,  exit_signal, goodput,
                                        productive,  badput,  log_dropped, store_healthy, store_errors,
                                        tpu_resets};
  if (input.slice) AddSliceFamilies(*input.slice, families);
  return families;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, std::function<MetricsInput()> snapshot, std::string version) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics.listen \"", listen, "\": cannot listen: ", e.what()));
  }
  auto collector = std::make_shared<SnapshotCollector>(std::move(snapshot), std::move(version));
  server->exposer_->RegisterCollectable(collector);
  server->collector_ = collector;
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  const std::string host = listen.substr(0, listen.rfind(':'));
  server->address_ = absl::StrCat(host, ":", ports.empty() ? 0 : ports.front());
  return server;
}

MetricsServer::~MetricsServer() = default;

}  // namespace tpud
