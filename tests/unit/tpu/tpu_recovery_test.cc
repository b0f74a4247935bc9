// The TPU recovery ladder (pure), the reset budget, and the TpuRecovery
// service on fake backends and simulated time: which backend each failure
// reaches, budget and backoff, escalation, and results posted to the loop.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>

#include "daemon/tpu/reset_budget.h"
#include "daemon/tpu/tpu_ladder.h"
#include "daemon/tpu/tpu_recovery.h"
#include "tests/support/fake_tpu_control.h"
#include "tests/support/fake_wait_clock.h"

namespace tpud {
namespace {

using FC = FailureClass;
using testing::FakeTpuControl;
using testing::FakeWaitClock;

TpuNode Node(const std::string& state, const std::string& health) {
  TpuNode node;
  node.state = state;
  node.health = health;
  return node;
}

TpuRung Rung(FC c, std::optional<TpuNode> node, bool has_node = true, bool escalate = false) {
  TpuLadderInput in;
  in.failure_class = c;
  in.has_node_backend = has_node;
  in.has_local_backend = true;
  in.node = std::move(node);
  in.escalate = escalate;
  return PlanTpuRecovery(in).rung;
}

TEST_CASE("Ladder: each failure class on a READY, HEALTHY node", "[tpu][ladder]") {
  const TpuNode ok = Node("READY", "HEALTHY");
  const std::pair<FC, TpuRung> table[] = {
      {FC::kDeviceBusy, TpuRung::kLocal},        {FC::kCrash, TpuRung::kLocal},
      {FC::kCpuFallback, TpuRung::kLocal},       {FC::kDeadlineExceeded, TpuRung::kNodeReset},
      {FC::kHang, TpuRung::kNodeReset},          {FC::kHardware, TpuRung::kNodeReset},
      {FC::kUnknown, TpuRung::kNodeReset},       {FC::kConnection, TpuRung::kNone},
      {FC::kPreemption, TpuRung::kNone},         {FC::kHbmOom, TpuRung::kNone},
      {FC::kUserError, TpuRung::kNone},
  };
  for (const auto& [failure_class, rung] : table) {
    INFO(FailureClassName(failure_class));
    CHECK(Rung(failure_class, ok) == rung);
  }
}

TEST_CASE("Ladder: the node's condition decides before the failure class", "[tpu][ladder]") {
  CHECK(Rung(FC::kDeviceBusy, Node("PREEMPTED", "")) == TpuRung::kNodeStart);
  CHECK(Rung(FC::kCrash, Node("STOPPED", "")) == TpuRung::kNodeStart);
  CHECK(Rung(FC::kDeadlineExceeded, Node("STARTING", "")) == TpuRung::kNodeStart);
  CHECK(Rung(FC::kPreemption, Node("PREEMPTED", "")) == TpuRung::kNodeStart);
  CHECK(Rung(FC::kDeadlineExceeded, Node("READY", "UNHEALTHY_MAINTENANCE")) == TpuRung::kWaitForMaintenance);
  CHECK(Rung(FC::kDeadlineExceeded, Node("TERMINATED", "")) == TpuRung::kNone);
}

TEST_CASE("Ladder: connection resets the node only when its health is known and not HEALTHY",
          "[tpu][ladder]") {
  CHECK(Rung(FC::kConnection, Node("READY", "TIMEOUT")) == TpuRung::kNodeReset);
  CHECK(Rung(FC::kConnection, Node("READY", "UNHEALTHY_TENSORFLOW")) == TpuRung::kNodeReset);
  CHECK(Rung(FC::kConnection, Node("READY", "HEALTHY")) == TpuRung::kNone);
  CHECK(Rung(FC::kConnection, std::nullopt) == TpuRung::kNone);  // Describe failed.
  CHECK(Rung(FC::kConnection, std::nullopt, /*has_node=*/false) == TpuRung::kNone);
}

TEST_CASE("Ladder: local first climbs to the node when escalated, local stands in for a missing node backend",
          "[tpu][ladder]") {
  CHECK(Rung(FC::kDeviceBusy, Node("READY", "HEALTHY"), true, /*escalate=*/true) == TpuRung::kNodeReset);
  CHECK(Rung(FC::kDeviceBusy, std::nullopt, /*has_node=*/false, /*escalate=*/true) == TpuRung::kLocal);
  CHECK(Rung(FC::kDeadlineExceeded, std::nullopt, /*has_node=*/false) == TpuRung::kLocal);
}

TEST_CASE("ResetBudget: counts resets in a sliding hour and doubles the wait between them", "[tpu][budget]") {
  ResetBudget budget(TpuResetPolicy{2, 60, 100});
  const SteadyTime t0{};
  const auto at = [&](double s) { return t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(Seconds(s)); };
  CHECK(budget.Allows(at(0)));
  CHECK(budget.WaitBefore(at(0)) == Seconds(0));
  budget.Record(at(0), at(10));
  CHECK(budget.WaitBefore(at(10)).count() == Approx(60));
  CHECK(budget.WaitBefore(at(40)).count() == Approx(30));
  budget.Record(at(100), at(110));
  CHECK(budget.WaitBefore(at(110)).count() == Approx(100));  // 120, capped at backoff_max_seconds.
  CHECK_FALSE(budget.Allows(at(200)));
  CHECK(budget.Allows(at(3600)));  // The first one left the window.
  CHECK(budget.CountInWindow(at(3700)) == 0);
}

// A TpuRecovery on fake backends ("api" and "local") and simulated time.
struct Rig {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<FakeWaitClock> clock = std::make_shared<FakeWaitClock>();
  FakeTpuControl* node = nullptr;
  FakeTpuControl* local = nullptr;
  std::unique_ptr<TpuRecovery> recovery;

  explicit Rig(TpuResetPolicy policy = {}, bool with_node = true) {
    TpuRecovery::Backends backends;
    if (with_node) {
      auto n = std::make_unique<FakeTpuControl>("api", clock.get());
      node = n.get();
      backends.node = std::move(n);
    }
    auto l = std::make_unique<FakeTpuControl>("local", clock.get());
    local = l.get();
    backends.local = std::move(l);
    backends.clock = clock;
    TpuConfig config;
    config.timeout_seconds = 300;
    config.poll_interval_seconds = 10;
    recovery = std::make_unique<TpuRecovery>(io, config, policy, std::move(backends));
  }

  // Runs the loop until `done` ran; its result.
  TpuResetResult Await(std::optional<TpuResetResult>& slot) {
    while (!slot) REQUIRE(io.run_one_for(std::chrono::seconds(10)) == 1);
    return *slot;
  }
  TpuResetResult Reset(FC failure_class, const std::string& job = "trainer", std::vector<int> spare = {}) {
    std::optional<TpuResetResult> slot;
    recovery->Reset(TpuResetRequest{job, failure_class, spare}, [&](TpuResetResult r) { slot = r; });
    return Await(slot);
  }
};

TEST_CASE("TpuRecovery: deadline_exceeded resets the node and reports backend and duration", "[tpu][recovery]") {
  Rig rig;
  rig.node->SetResetSeconds(42);
  const TpuResetResult result = rig.Reset(FC::kDeadlineExceeded);
  CHECK(result.attempted);
  CHECK(result.backend == "api");
  CHECK(result.duration.count() == Approx(42));
  CHECK(result.status.ok());
  CHECK(rig.node->calls() == std::vector<std::string>{"describe", "reset"});
  CHECK(rig.local->calls().empty());
  CHECK(rig.recovery->Status().last->rung == "node_reset");
}

TEST_CASE("TpuRecovery: device_busy frees the devices locally, sparing the given process groups",
          "[tpu][recovery]") {
  Rig rig;
  const TpuResetResult result = rig.Reset(FC::kDeviceBusy, "trainer", {4242, 4343});
  CHECK(result.backend == "local");
  CHECK(result.status.ok());
  CHECK(rig.local->Count("reset") == 1);
  CHECK(rig.local->spare_pgids() == std::vector<int>{4242, 4343});
  CHECK(rig.node->Count("reset") == 0);
}

TEST_CASE("TpuRecovery: a failed local reset escalates to the node in the same request", "[tpu][recovery]") {
  Rig rig;
  rig.local->SetResetStatus(absl::FailedPreconditionError("a spared attempt holds /dev/accel0"));
  const TpuResetResult result = rig.Reset(FC::kCrash);
  CHECK(result.backend == "local,api");
  CHECK(result.status.ok());
  CHECK(rig.node->Count("reset") == 1);
}

TEST_CASE("TpuRecovery: the same failure again after a local reset climbs to the node", "[tpu][recovery]") {
  Rig rig(TpuResetPolicy{6, 0, 0});
  CHECK(rig.Reset(FC::kDeviceBusy).backend == "local");
  CHECK(rig.Reset(FC::kDeviceBusy).backend == "api");
  CHECK(rig.Reset(FC::kDeviceBusy, "other-job").backend == "local");  // Another job starts at the bottom.
}

TEST_CASE("TpuRecovery: connection on a HEALTHY node does nothing, on an unhealthy one resets it",
          "[tpu][recovery]") {
  Rig rig;
  const TpuResetResult healthy = rig.Reset(FC::kConnection);
  CHECK_FALSE(healthy.attempted);
  CHECK(rig.node->Count("reset") == 0);
  rig.node->SetNode("READY", "TIMEOUT");
  const TpuResetResult timeout = rig.Reset(FC::kConnection);
  CHECK(timeout.attempted);
  CHECK(timeout.backend == "api");
  CHECK(rig.node->Count("reset") == 1);
}

TEST_CASE("TpuRecovery: a PREEMPTED node is started, whatever the failure", "[tpu][recovery]") {
  Rig rig;
  rig.node->SetNode("PREEMPTED", "");
  const TpuResetResult result = rig.Reset(FC::kDeadlineExceeded);
  CHECK(result.backend == "api");
  CHECK(rig.node->calls() == std::vector<std::string>{"describe", "start"});
}

TEST_CASE("TpuRecovery: UNHEALTHY_MAINTENANCE is waited out by polling, without a reset", "[tpu][recovery]") {
  Rig rig;
  rig.node->QueueNode("READY", "UNHEALTHY_MAINTENANCE");  // The ladder's Describe.
  rig.node->QueueNode("READY", "UNHEALTHY_MAINTENANCE");  // First poll.
  rig.node->QueueNode("READY", "HEALTHY");                // Second poll.
  const TpuResetResult result = rig.Reset(FC::kDeadlineExceeded);
  CHECK(result.attempted);
  CHECK(result.status.ok());
  CHECK(result.duration.count() == Approx(10));  // One poll interval.
  CHECK(rig.node->Count("reset") == 0);
  CHECK(rig.node->Count("describe") == 3);
}

TEST_CASE("TpuRecovery: maintenance that outlasts tpu.reset.timeout_seconds is DeadlineExceeded",
          "[tpu][recovery]") {
  Rig rig;
  rig.node->SetNode("READY", "UNHEALTHY_MAINTENANCE");
  const TpuResetResult result = rig.Reset(FC::kHang);
  CHECK(result.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(result.status.message()).find("UNHEALTHY_MAINTENANCE") != std::string::npos);
}

TEST_CASE("TpuRecovery: resets back off, then stop at max_resets_per_hour", "[tpu][recovery][budget]") {
  Rig rig(TpuResetPolicy{2, 60, 900});
  rig.node->SetResetSeconds(5);
  CHECK(rig.Reset(FC::kDeadlineExceeded).status.ok());
  CHECK(rig.clock->sleeps().empty());
  CHECK(rig.Reset(FC::kDeadlineExceeded).status.ok());
  CHECK(rig.clock->sleeps() == std::vector<double>{60});  // backoff_initial_seconds after the first.
  const TpuResetResult third = rig.Reset(FC::kDeadlineExceeded);
  CHECK(third.attempted);
  CHECK(third.status.code() == absl::StatusCode::kResourceExhausted);
  CHECK(rig.node->Count("reset") == 2);
  CHECK(rig.recovery->Status().resets_last_hour == 2);
}

TEST_CASE("TpuRecovery: a failure seen during a node reset is covered by it", "[tpu][recovery]") {
  Rig rig;
  rig.node->SetResetSeconds(1);
  rig.node->CloseGate();
  std::optional<TpuResetResult> first, second;
  rig.recovery->Reset({"a", FC::kDeadlineExceeded, {}}, [&](TpuResetResult r) { first = r; });
  rig.node->WaitEntered();
  rig.recovery->Reset({"b", FC::kDeadlineExceeded, {}}, [&](TpuResetResult r) { second = r; });
  CHECK(rig.recovery->Status().running == "job a");
  CHECK(rig.recovery->Status().queued == 1);
  rig.node->OpenGate();
  CHECK(rig.Await(first).attempted);
  CHECK_FALSE(rig.Await(second).attempted);
  CHECK(rig.node->Count("reset") == 1);
}

TEST_CASE("TpuRecovery: reset by hand picks the named backend, refuses an unknown one", "[tpu][recovery]") {
  Rig rig;
  std::optional<TpuResetResult> slot;
  CHECK(rig.recovery->ResetByHand("gcloud", {}, [](TpuResetResult) {}).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(rig.recovery->ResetByHand("local", {7}, [&](TpuResetResult r) { slot = r; }).ok());
  CHECK(rig.Await(slot).backend == "local");
  CHECK(rig.local->spare_pgids() == std::vector<int>{7});
  slot.reset();
  REQUIRE(rig.recovery->ResetByHand("", {}, [&](TpuResetResult r) { slot = r; }).ok());
  CHECK(rig.Await(slot).backend == "api");
  CHECK(rig.node->Count("describe") == 0);  // No ladder by hand.
}

TEST_CASE("TpuRecovery: Describe with a max age answers from a node described that recently", "[tpu][recovery]") {
  Rig rig;
  rig.node->QueueNode("READY", "HEALTHY");
  REQUIRE(rig.recovery->Describe(nullptr, Seconds(1)).ok());
  CHECK(rig.node->Count("describe") == 1);
  rig.clock->AdvanceSeconds(0.5);
  CHECK(rig.recovery->Describe(nullptr, Seconds(1))->state == "READY");
  CHECK(rig.node->Count("describe") == 1);  // From the cache.
  rig.clock->AdvanceSeconds(0.6);
  rig.node->QueueNode("STOPPING", "");
  CHECK(rig.recovery->Describe(nullptr, Seconds(1))->state == "STOPPING");
  CHECK(rig.node->Count("describe") == 2);
  REQUIRE(rig.recovery->Describe(nullptr).ok());  // No max age: always asks.
  CHECK(rig.node->Count("describe") == 3);
}

TEST_CASE("TpuRecovery: without a node backend, node failures reset locally and Describe is refused",
          "[tpu][recovery]") {
  Rig rig({}, /*with_node=*/false);
  CHECK(rig.Reset(FC::kDeadlineExceeded).backend == "local");
  CHECK(rig.recovery->Describe(nullptr).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(rig.recovery->Status().node_backend.empty());
}

TEST_CASE("TpuRecovery: destruction cancels the reset in flight and never calls its done", "[tpu][recovery]") {
  Rig rig;
  rig.node->CloseGate();
  bool called = false;
  rig.recovery->Reset({"a", FC::kHang, {}}, [&](TpuResetResult) { called = true; });
  rig.node->WaitEntered();
  rig.recovery.reset();  // Joins the worker: the fake saw the cancellation.
  rig.io.poll();
  CHECK_FALSE(called);
}

TEST_CASE("TpuRecovery::Create: none gives no service, bad config names the key", "[tpu][recovery]") {
  boost::asio::io_context io;
  TpuConfig config;
  auto none = TpuRecovery::Create(io, config, {});
  REQUIRE(none.ok());
  CHECK(*none == nullptr);
  config.backend = "api";
  TpuResetPolicy policy;
  policy.max_resets_per_hour = -1;
  auto bad = TpuRecovery::Create(io, config, policy);
  CHECK(bad.status().message() == "tpu.reset.max_resets_per_hour: must be >= 0, got -1");
}

}  // namespace
}  // namespace tpud
