// tpud_tpu_resets_total: TpuRecovery counts each finished reset by the backend
// that ran it and its result, from 0 for every configured backend, and the
// metrics builder turns the counts into the counter family the alerts and the
// dashboard use (ops/prometheus/tpud-alerts.yml, ops/grafana/).
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <prometheus/metric_family.h>

#include "daemon/metrics/metrics.h"
#include "daemon/tpu/tpu_recovery.h"
#include "tests/support/fake_tpu_control.h"
#include "tests/support/fake_wait_clock.h"

namespace tpud {
namespace {

using Counts = std::map<std::pair<std::string, std::string>, std::int64_t>;
using testing::FakeTpuControl;
using testing::FakeWaitClock;

// A TpuRecovery on fake "api" and "local" backends and simulated time.
struct ResetRig {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<FakeWaitClock> clock = std::make_shared<FakeWaitClock>();
  FakeTpuControl* node = nullptr;
  FakeTpuControl* local = nullptr;
  std::unique_ptr<TpuRecovery> recovery;

  explicit ResetRig(TpuResetPolicy policy) {
    TpuRecovery::Backends backends;
    auto n = std::make_unique<FakeTpuControl>("api", clock.get());
    auto l = std::make_unique<FakeTpuControl>("local", clock.get());
    node = n.get();
    local = l.get();
    backends.node = std::move(n);
    backends.local = std::move(l);
    backends.clock = clock;
    recovery = std::make_unique<TpuRecovery>(io, TpuConfig{}, policy, std::move(backends));
  }

  TpuResetResult Reset(FailureClass failure_class) {
    std::optional<TpuResetResult> slot;
    recovery->Reset(TpuResetRequest{"trainer", failure_class, {}}, [&](TpuResetResult r) { slot = r; });
    while (!slot) REQUIRE(io.run_one_for(std::chrono::seconds(10)) == 1);
    return *slot;
  }
};

}  // namespace

TEST_CASE("TpuRecovery: resets_total counts resets by backend and result, from 0 for each backend",
          "[tpu][recovery][metrics]") {
  ResetRig rig(TpuResetPolicy{4, 0, 0});
  CHECK(rig.recovery->Status().resets_total ==
        Counts{{{"api", "failed"}, 0}, {{"api", "ok"}, 0}, {{"local", "failed"}, 0}, {{"local", "ok"}, 0}});

  REQUIRE(rig.Reset(FailureClass::kDeadlineExceeded).status.ok());  // The node: api.
  rig.local->SetResetStatus(absl::FailedPreconditionError("a spared attempt holds /dev/accel0"));
  REQUIRE(rig.Reset(FailureClass::kCrash).backend == "local,api");  // Escalated: the node finished it.
  rig.node->SetResetStatus(absl::UnavailableError("503 from the TPU API"));
  REQUIRE_FALSE(rig.Reset(FailureClass::kDeadlineExceeded).status.ok());
  const TpuResetResult refused = rig.Reset(FailureClass::kDeadlineExceeded);  // Over max_resets_per_hour.
  REQUIRE(refused.status.code() == absl::StatusCode::kResourceExhausted);

  CHECK(rig.recovery->Status().resets_total ==
        Counts{{{"api", "failed"}, 2}, {{"api", "ok"}, 2}, {{"local", "failed"}, 0}, {{"local", "ok"}, 0}});
}

TEST_CASE("Metrics: tpud_tpu_resets_total has a counter per backend and result", "[metrics]") {
  MetricsInput input;
  input.tpu_resets = {{{"api", "failed"}, 2}, {{"api", "ok"}, 5}};
  const std::vector<prometheus::MetricFamily> families = BuildMetricFamilies(input, "0.0.0");
  const auto family = std::find_if(families.begin(), families.end(),
                                   [](const auto& f) { return f.name == "tpud_tpu_resets_total"; });
  REQUIRE(family != families.end());
  CHECK(family->type == prometheus::MetricType::Counter);
  REQUIRE(family->metric.size() == 2);
  const auto& failed = family->metric[0];
  REQUIRE(failed.label.size() == 2);
  CHECK(failed.label[0].name == "backend");
  CHECK(failed.label[0].value == "api");
  CHECK(failed.label[1].name == "result");
  CHECK(failed.label[1].value == "failed");
  CHECK(failed.counter.value == 2);
  CHECK(family->metric[1].label[1].value == "ok");
  CHECK(family->metric[1].counter.value == 5);

  // Without a reset backend: the family is there, with no series.
  const auto none = BuildMetricFamilies(MetricsInput{}, "0.0.0");
  CHECK(std::count_if(none.begin(), none.end(), [](const auto& f) {
          return f.name == "tpud_tpu_resets_total" && f.metric.empty();
        }) == 1);
}

}  // namespace tpud
