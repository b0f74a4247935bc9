// The TPU checks behind preflight and `tpuctl doctor` (daemon/tpu/tpu_checks.h):
// what each fact makes of its check, and which reset a failing check asks for.
#include <catch2/catch.hpp>

#include "daemon/tpu/tpu_checks.h"

namespace tpud {
namespace {

TpuFacts Healthy() {
  TpuFacts f;
  f.device_globs = {"/dev/accel*"};
  f.devices = {"/dev/accel0"};
  f.holders = std::vector<FileHolder>{};
  TpuNode node;
  node.state = "READY";
  node.health = "HEALTHY";
  f.node = node;
  f.node_name = "n";
  return f;
}

TpuCheck Named(const std::vector<TpuCheck>& checks, const std::string& name) {
  for (const TpuCheck& c : checks) {
    if (c.name == name) return c;
  }
  FAIL("no check " << name);
  return {};
}

TEST_CASE("TPU checks: a healthy host passes all four, in order", "[tpu][checks]") {
  const std::vector<TpuCheck> checks = RunTpuChecks(Healthy());
  REQUIRE(checks.size() == 4);
  CHECK(checks[0].name == "devices");
  CHECK(checks[1].name == "holders");
  CHECK(checks[2].name == "node");
  CHECK(checks[3].name == "environment");
  CHECK_FALSE(FirstFailure(checks).has_value());
  CHECK(checks[2].detail == "node state READY, health HEALTHY");
}

TEST_CASE("TPU checks: missing devices fail only when required", "[tpu][checks]") {
  TpuFacts f = Healthy();
  f.devices.clear();
  CHECK(Named(RunTpuChecks(f), "devices").ok);
  f.require_devices = true;
  const TpuCheck devices = Named(RunTpuChecks(f), "devices");
  CHECK_FALSE(devices.ok);
  CHECK(devices.detail == "no device file matches /dev/accel*");
  CHECK_FALSE(devices.fix.empty());
  CHECK_FALSE(devices.reset_for.has_value());
}

TEST_CASE("TPU checks: a foreign holder asks for a local reset, another job's attempt does not",
          "[tpu][checks]") {
  TpuFacts f = Healthy();
  f.holders = std::vector<FileHolder>{{77, "/dev/accel0", "python3"}};
  f.holder_pgids[77] = 77;
  const TpuCheck foreign = Named(RunTpuChecks(f), "holders");
  CHECK_FALSE(foreign.ok);
  CHECK(foreign.detail == "pid 77 (python3) holds /dev/accel0");
  CHECK(foreign.reset_for == FailureClass::kDeviceBusy);

  f.supervised_pgids = {77};
  const TpuCheck supervised = Named(RunTpuChecks(f), "holders");
  CHECK_FALSE(supervised.ok);
  CHECK_FALSE(supervised.reset_for.has_value());

  f.own_pgid = 77;  // Doctor on the job that holds it.
  CHECK(Named(RunTpuChecks(f), "holders").ok);
}

TEST_CASE("TPU checks: node state and health decide the node check and its reset", "[tpu][checks]") {
  struct Case {
    std::string state, health;
    bool ok;
    std::optional<FailureClass> reset_for;
  };
  const Case cases[] = {
      {"READY", "HEALTHY", true, std::nullopt},
      {"READY", "", true, std::nullopt},  // Health not reported yet.
      {"PREEMPTED", "", false, FailureClass::kPreemption},
      {"STOPPED", "", false, FailureClass::kPreemption},
      {"STARTING", "", false, FailureClass::kPreemption},
      {"READY", "UNHEALTHY_MAINTENANCE", false, FailureClass::kConnection},
      {"READY", "TIMEOUT", false, FailureClass::kConnection},
      {"TERMINATED", "", false, std::nullopt},
  };
  for (const Case& c : cases) {
    INFO(c.state << " " << c.health);
    TpuFacts f = Healthy();
    f.node->state = c.state;
    f.node->health = c.health;
    const TpuCheck node = Named(RunTpuChecks(f), "node");
    CHECK(node.ok == c.ok);
    CHECK(node.reset_for == c.reset_for);
  }
}

TEST_CASE("TPU checks: an unknown node is skipped before an attempt, failed by doctor", "[tpu][checks]") {
  TpuFacts f = Healthy();
  f.node.reset();
  f.node_error = "PERMISSION_DENIED: tpu.nodes.get";
  CHECK(Named(RunTpuChecks(f), "node").ok);
  f.unknown_node_fails = true;
  const TpuCheck node = Named(RunTpuChecks(f), "node");
  CHECK_FALSE(node.ok);
  CHECK(node.detail == "cannot describe the node: PERMISSION_DENIED: tpu.nodes.get");
  f.node_error.clear();  // No node backend at all.
  CHECK(Named(RunTpuChecks(f), "node").detail == "not checked (no node backend)");
}

TEST_CASE("TPU checks: TPU_NAME, PJRT_DEVICE and JAX_PLATFORMS must point at the TPU", "[tpu][checks]") {
  const std::pair<std::map<std::string, std::string>, bool> cases[] = {
      {{}, true},
      {{{"TPU_NAME", "n"}}, true},
      {{{"TPU_NAME", "local"}}, true},
      {{{"TPU_NAME", "other"}}, false},
      {{{"TPU_NAME", ""}}, false},
      {{{"PJRT_DEVICE", "TPU"}}, true},
      {{{"PJRT_DEVICE", "CPU"}}, false},
      {{{"JAX_PLATFORMS", "tpu,cpu"}}, true},
      {{{"JAX_PLATFORMS", "cpu"}}, false},
  };
  for (const auto& [env, ok] : cases) {
    TpuFacts f = Healthy();
    f.env = env;
    const TpuCheck check = Named(RunTpuChecks(f), "environment");
    INFO(check.detail);
    CHECK(check.ok == ok);
    CHECK_FALSE(check.reset_for.has_value());
  }
}

}  // namespace
}  // namespace tpud
