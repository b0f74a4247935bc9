// The TPU RPCs of SupervisorService (daemon/rpc/tpu_service.cc), called in
// process: a real event loop thread, a Supervisor on a fake launcher, and
// TpuRecovery on fake backends.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "daemon/rpc/service.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_launcher.h"
#include "tests/support/fake_tpu_control.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

using testing::FakeTpuControl;

struct ServiceRig {
  testing::TempDir dir;
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  Supervisor supervisor{clock, launcher, {dir.path() / "logs", dir.path() / "state"}};
  std::shared_ptr<testing::FakeWaitClock> wait_clock = std::make_shared<testing::FakeWaitClock>();
  FakeTpuControl* node = nullptr;
  FakeTpuControl* local = nullptr;
  std::unique_ptr<TpuRecovery> recovery;
  std::unique_ptr<TpuPreflight> checks;
  SupervisorService service{io, supervisor, DaemonInfo{}};
  std::thread loop;

  explicit ServiceRig(bool with_backend = true) {
    TpuConfig config;
    config.backend = with_backend ? "api" : "none";
    config.name = "n";
    config.device_globs = {(dir.path() / "dev").string() + "/accel*"};
    config.lock_file = (dir.path() / "libtpu_lockfile").string();
    if (with_backend) {
      auto n = std::make_unique<FakeTpuControl>("api", wait_clock.get());
      auto l = std::make_unique<FakeTpuControl>("local", wait_clock.get());
      node = n.get();
      local = l.get();
      recovery = std::make_unique<TpuRecovery>(io, config, TpuResetPolicy{},
                                               TpuRecovery::Backends{std::move(n), std::move(l), wait_clock});
    }
    checks = std::make_unique<TpuPreflight>(config, TpuPreflightPolicy{}, recovery.get());
    service.SetTpu(config.backend, recovery.get(), checks.get());
    JobSpec spec;
    spec.name = "trainer";
    spec.command = {"/bin/true"};
    spec.env = {{"PJRT_DEVICE", "CPU"}};
    REQUIRE(supervisor.AddJob(spec).ok());
    loop = std::thread([this] { io.run(); });
  }
  ~ServiceRig() {
    work.reset();
    io.stop();
    loop.join();
    recovery.reset();
  }
};

TEST_CASE("TPU service: GetTpu describes the node and reports the budget", "[tpu][rpc]") {
  ServiceRig rig;
  rig.node->SetNode("READY", "UNHEALTHY_MAINTENANCE");
  grpc::ServerContext ctx;
  v1::GetTpuResponse resp;
  REQUIRE(rig.service.GetTpu(&ctx, nullptr, &resp).ok());
  CHECK(resp.backend() == "api");
  CHECK(resp.node().state() == "READY");
  CHECK(resp.node().health() == "UNHEALTHY_MAINTENANCE");
  CHECK(resp.max_resets_per_hour() == 6);
  CHECK_FALSE(resp.has_last_reset());
}

TEST_CASE("TPU service: ResetTpu runs the named backend and answers with its result", "[tpu][rpc]") {
  ServiceRig rig;
  grpc::ServerContext ctx;
  v1::ResetTpuRequest req;
  req.set_backend("local");
  v1::ResetTpuResponse resp;
  REQUIRE(rig.service.ResetTpu(&ctx, &req, &resp).ok());
  CHECK(resp.reset().attempted());
  CHECK(resp.reset().backend() == "local");
  CHECK(resp.reset().result() == "ok");
  CHECK(resp.reset().why() == "by hand");
  CHECK(rig.local->Count("reset") == 1);

  req.set_backend("gcloud");
  const grpc::Status refused = rig.service.ResetTpu(&ctx, &req, &resp);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("TPU service: Doctor lists the checks per job with fixes, NOT_FOUND for an unknown job",
          "[tpu][rpc]") {
  ServiceRig rig;
  grpc::ServerContext ctx;
  v1::DoctorRequest req;
  v1::DoctorResponse resp;
  REQUIRE(rig.service.Doctor(&ctx, &req, &resp).ok());
  REQUIRE(resp.jobs_size() == 1);
  CHECK(resp.jobs(0).job() == "trainer");
  REQUIRE(resp.jobs(0).checks_size() == 4);
  const v1::DoctorCheck& env = resp.jobs(0).checks(3);
  CHECK(env.name() == "environment");
  CHECK_FALSE(env.ok());
  CHECK(env.fix() == "set PJRT_DEVICE=TPU in the job's env");
  CHECK(resp.jobs(0).checks(2).ok());  // The fake node is READY and HEALTHY.

  req.set_job("nope");
  CHECK(rig.service.Doctor(&ctx, &req, &resp).error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("TPU service: without a reset backend, GetTpu says so and ResetTpu is refused", "[tpu][rpc]") {
  ServiceRig rig(/*with_backend=*/false);
  grpc::ServerContext ctx;
  v1::GetTpuResponse tpu;
  REQUIRE(rig.service.GetTpu(&ctx, nullptr, &tpu).ok());
  CHECK(tpu.backend() == "none");
  CHECK_FALSE(tpu.has_node());
  CHECK(tpu.node_error() == "no TPU reset backend (tpu.reset.backend: none)");
  v1::ResetTpuRequest req;
  v1::ResetTpuResponse resp;
  CHECK(rig.service.ResetTpu(&ctx, &req, &resp).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  v1::DoctorRequest doctor_req;
  v1::DoctorResponse doctor;
  REQUIRE(rig.service.Doctor(&ctx, &doctor_req, &doctor).ok());
  CHECK(doctor.jobs(0).checks(2).detail() == "not checked (no node backend)");
}

}  // namespace
}  // namespace tpud
