// The slice's metrics (daemon/metrics/metrics.h SliceMetrics): present only
// with a slice, named and labelled as the alerts and dashboard expect.
#include <prometheus/metric_family.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "daemon/metrics/metrics.h"

namespace tpud {
namespace {

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& families, const std::string& name) {
  const auto it = std::find_if(families.begin(), families.end(), [&](const auto& f) { return f.name == name; });
  return it == families.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("Metrics: a slice shows etcd, its workers up and lost, and each gang's generation and restarts",
          "[metrics][slice]") {
  MetricsInput input;
  CHECK(Find(BuildMetricFamilies(input, "v"), "tpud_etcd_up") == nullptr);  // No slice: no slice metrics.

  SliceMetrics slice;
  slice.etcd_up = true;
  slice.workers_up = 3;
  slice.workers_lost = 1;
  slice.gang_generation["train"] = 7;
  slice.gang_restarts[{"train", "crash"}] = 2;
  input.slice = slice;
  const auto families = BuildMetricFamilies(input, "v");
  REQUIRE(Find(families, "tpud_etcd_up") != nullptr);
  CHECK(Find(families, "tpud_etcd_up")->metric.at(0).gauge.value == 1);
  const auto* workers = Find(families, "tpud_slice_workers");
  REQUIRE(workers != nullptr);
  CHECK(workers->metric.at(0).label.at(0).value == "up");
  CHECK(workers->metric.at(0).gauge.value == 3);
  CHECK(workers->metric.at(1).label.at(0).value == "lost");
  CHECK(workers->metric.at(1).gauge.value == 1);
  const auto* generation = Find(families, "tpud_gang_generation");
  REQUIRE(generation != nullptr);
  CHECK(generation->metric.at(0).label.at(0).value == "train");
  CHECK(generation->metric.at(0).gauge.value == 7);
  const auto* restarts = Find(families, "tpud_gang_restarts_total");
  REQUIRE(restarts != nullptr);
  CHECK(restarts->type == prometheus::MetricType::Counter);
  CHECK(restarts->metric.at(0).label.at(1).value == "crash");
  CHECK(restarts->metric.at(0).counter.value == 2);
  CHECK(Find(families, "tpud_slice_leader")->metric.at(0).gauge.value == 0);
}

}  // namespace tpud
