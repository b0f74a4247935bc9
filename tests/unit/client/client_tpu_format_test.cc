// How tpuctl shows the TPU: `tpu`, `reset-tpu` and the `doctor` checklist
// (client/format_tpu.h).
#include <catch2/catch.hpp>
#include <string>

#include <nlohmann/json.hpp>

#include "client/format_tpu.h"

namespace tpud::client {
namespace {

using Catch::Matchers::Contains;

tpud::v1::GetTpuResponse Tpu() {
  tpud::v1::GetTpuResponse tpu;
  tpu.set_backend("api");
  tpud::v1::TpuNode* node = tpu.mutable_node();
  node->set_name("projects/p/locations/z/nodes/n");
  node->set_accelerator_type("v4-8");
  node->set_state("READY");
  node->set_health("UNHEALTHY_MAINTENANCE");
  node->set_health_description("host maintenance");
  tpud::v1::TpuSymptom* symptom = node->add_symptoms();
  symptom->set_create_time("2026-11-21T10:00:00Z");
  symptom->set_symptom_type("EXECUTE_TIMED_OUT");
  symptom->set_worker_id("0");
  tpu.set_resets_last_hour(1);
  tpu.set_max_resets_per_hour(6);
  tpud::v1::TpuReset* last = tpu.mutable_last_reset();
  last->set_job("trainer");
  last->set_attempted(true);
  last->set_backend("api");
  last->set_duration_seconds(41.2);
  last->set_result("ok");
  return tpu;
}

TEST_CASE("FormatTpu: node, state, health, symptoms, budget and the last reset", "[client][tpu]") {
  const std::string text = FormatTpu(Tpu());
  CHECK_THAT(text, Contains("backend:     api\n"));
  CHECK_THAT(text, Contains("node:        projects/p/locations/z/nodes/n (v4-8)\n"));
  CHECK_THAT(text, Contains("state:       READY\n"));
  CHECK_THAT(text, Contains("health:      UNHEALTHY_MAINTENANCE: host maintenance\n"));
  CHECK_THAT(text, Contains("symptoms:\n  2026-11-21T10:00:00Z EXECUTE_TIMED_OUT worker 0\n"));
  CHECK_THAT(text, Contains("resets:      1 in the last hour (max 6)\n"));
  CHECK_THAT(text, Contains("last reset:  TPU reset (api) done in 41.2s for job trainer\n"));
}

TEST_CASE("FormatTpu: an unknown node says why", "[client][tpu]") {
  tpud::v1::GetTpuResponse tpu = Tpu();
  tpu.clear_node();
  tpu.set_node_error("PERMISSION_DENIED");
  const std::string text = FormatTpu(tpu);
  CHECK_THAT(text, Contains("node:        unknown: PERMISSION_DENIED\n"));
  CHECK(text.find("state:") == std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(TpuJson(tpu));
  CHECK(json["node"].is_null());
  CHECK(json["last_reset"]["backend"] == "api");
}

TEST_CASE("FormatTpuReset: done, failed, nothing to do", "[client][tpu]") {
  tpud::v1::TpuReset reset;
  CHECK(FormatTpuReset(reset) == "TPU reset: nothing to do");
  reset.set_attempted(true);
  reset.set_backend("local");
  reset.set_duration_seconds(0.2);
  reset.set_result("ok");
  CHECK(FormatTpuReset(reset) == "TPU reset (local) done in 0.2s");
  reset.set_result("a spared attempt holds /dev/accel0");
  CHECK(FormatTpuReset(reset) == "TPU reset (local) failed after 0.2s: a spared attempt holds /dev/accel0");
}

TEST_CASE("FormatDoctor: a checklist per job with fixes for what failed", "[client][tpu]") {
  tpud::v1::DoctorResponse doctor;
  doctor.set_backend("api");
  auto* job = doctor.add_jobs();
  job->set_job("trainer");
  auto* ok = job->add_checks();
  ok->set_name("devices");
  ok->set_ok(true);
  ok->set_detail("/dev/accel0");
  auto* bad = job->add_checks();
  bad->set_name("node");
  bad->set_detail("node state PREEMPTED");
  bad->set_fix("tpud starts it");
  CHECK(FormatDoctor(doctor) ==
        "TPU reset backend: api\n"
        "job trainer:\n"
        "  \u2713 devices      /dev/accel0\n"
        "  \u2717 node         node state PREEMPTED\n"
        "      fix: tpud starts it\n");
  CHECK(FailedChecks(doctor) == 1);
}

}  // namespace
}  // namespace tpud::client
