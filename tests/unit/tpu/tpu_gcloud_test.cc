// The "gcloud" TPU backend against tests/support/gcloud_standin.py, which
// records its argv and keeps the node in a JSON state file; and RunCommand,
// which runs it.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/tpu/command_runner.h"
#include "daemon/tpu/tpu_control.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;

const std::string kStandin = std::string(TPUD_SOURCE_DIR) + "/tests/support/gcloud_standin.py";

json ReadyNode() {
  return {{"name", "projects/p/locations/z/nodes/tpu-1"},
          {"state", "READY"},
          {"health", "HEALTHY"},
          {"acceleratorType", "v5litepod-8"},
          {"symptoms", json::array({{{"createTime", "2024-05-01T10:00:00Z"},
                                     {"symptomType", "HBM_OUT_OF_MEMORY"},
                                     {"details", "worker 0 ran out of HBM"},
                                     {"workerId", "0"}}})}};
}

// A state file, a log file and a "gcloud" TpuControl using the stand-in.
struct GcloudRig {
  testing::TempDir dir{"tpud-gcloud-test"};
  std::unique_ptr<TpuControl> control;
  std::vector<std::string> progress;

  explicit GcloudRig(json state = ReadyNode(), double timeout_seconds = 20,
                     double gcloud_timeout_seconds = 20) {
    dir.File("state.json", state.dump());
    ::setenv("GCLOUD_STANDIN_STATE", (dir.path() / "state.json").c_str(), 1);
    ::setenv("GCLOUD_STANDIN_LOG", (dir.path() / "calls.jsonl").c_str(), 1);
    TpuConfig config;
    config.backend = "gcloud";
    config.gcloud_path = kStandin;
    config.name = "tpu-1";
    config.project = "p";
    config.zone = "z";
    config.timeout_seconds = timeout_seconds;
    config.gcloud_timeout_seconds = gcloud_timeout_seconds;
    config.poll_interval_seconds = 0.05;
    control = *MakeTpuControl(config);
  }
  TpuCall Call(CancelToken* cancel = nullptr) {
    TpuCall call;
    call.cancel = cancel;
    call.progress = [this](const std::string& line) { progress.push_back(line); };
    return call;
  }
  // The recorded argv of every call, in order.
  std::vector<std::vector<std::string>> Calls() const {
    std::vector<std::vector<std::string>> calls;
    std::istringstream lines(dir.Read("calls.jsonl"));
    for (std::string line; std::getline(lines, line);)
      calls.push_back(json::parse(line).get<std::vector<std::string>>());
    return calls;
  }
  json State() const { return json::parse(dir.Read("state.json")); }
};

std::vector<std::string> Argv(const std::string& verb) {
  return {"compute", "tpus", "tpu-vm", verb, "tpu-1", "--zone", "z", "--project", "p", "--format=json"};
}

TEST_CASE("TPU gcloud: Reset runs stop then start with the documented argv and waits for READY", "[tpu]") {
  GcloudRig rig;
  REQUIRE(rig.control->name() == "gcloud");
  absl::Status reset = rig.control->Reset(rig.Call());
  REQUIRE(reset.ok());
  CHECK(rig.Calls() == std::vector<std::vector<std::string>>{Argv("describe"), Argv("stop"), Argv("describe"),
                                                             Argv("start"), Argv("describe")});
  CHECK(rig.State()["state"] == "READY");
  CHECK(rig.State()["health"] == "HEALTHY");
  CHECK(rig.progress.back() == "state READY, health HEALTHY");
}

TEST_CASE("TPU gcloud: Describe parses state, health and symptoms from --format=json", "[tpu]") {
  GcloudRig rig;
  absl::StatusOr<TpuNode> node = rig.control->Describe(nullptr);
  REQUIRE(node.ok());
  CHECK(node->name == "projects/p/locations/z/nodes/tpu-1");
  CHECK(node->state == "READY");
  CHECK(node->health == "HEALTHY");
  CHECK(node->accelerator_type == "v5litepod-8");
  REQUIRE(node->symptoms.size() == 1);
  CHECK(node->symptoms[0].symptom_type == "HBM_OUT_OF_MEMORY");
  CHECK(node->symptoms[0].create_time == "2024-05-01T10:00:00Z");
  CHECK(node->symptoms[0].details == "worker 0 ran out of HBM");
  CHECK(node->symptoms[0].worker_id == "0");
}

TEST_CASE("TPU gcloud: Start of a PREEMPTED node runs start only", "[tpu]") {
  json node = ReadyNode();
  node["state"] = "PREEMPTED";
  GcloudRig rig(node);
  REQUIRE(rig.control->Start(rig.Call()).ok());
  CHECK(rig.Calls() ==
        std::vector<std::vector<std::string>>{Argv("describe"), Argv("start"), Argv("describe")});
}

TEST_CASE("TPU gcloud: gcloud's NOT_FOUND and PERMISSION_DENIED become NotFound and PermissionDenied",
          "[tpu]") {
  SECTION("not found") {
    json node = ReadyNode();
    node["name"] = "projects/p/locations/z/nodes/other";
    GcloudRig rig(node);
    absl::StatusOr<TpuNode> described = rig.control->Describe(nullptr);
    CHECK(described.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(described.status().message()),
               Catch::StartsWith("node projects/p/locations/z/nodes/tpu-1 not found: ERROR: (gcloud."));
  }
  SECTION("permission denied on stop") {
    json node = ReadyNode();
    node["_standin"] = {
        {"fail", {{"stop", "ERROR: (gcloud.compute.tpus.tpu-vm.stop) PERMISSION_DENIED: no"}}}};
    GcloudRig rig(node);
    absl::Status s = rig.control->Reset(rig.Call());
    CHECK(s.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(s.message()),
               Catch::Contains("nodes/tpu-1") && Catch::Contains("PERMISSION_DENIED: no"));
  }
  SECTION("any other failure") {
    json node = ReadyNode();
    node["_standin"] = {{"fail", {{"start", "ERROR: (gcloud.compute.tpus.tpu-vm.start) INTERNAL: boom"}}}};
    GcloudRig rig(node);
    absl::Status s = rig.control->Reset(rig.Call());
    CHECK(s.code() == absl::StatusCode::kUnknown);
    CHECK_THAT(std::string(s.message()), Catch::Contains("tpu-vm start tpu-1: exit code 1: ERROR:"));
  }
}

TEST_CASE("TPU gcloud: a gcloud run past its timeout is killed", "[tpu]") {
  json node = ReadyNode();
  node["_standin"] = {{"sleep", {{"stop", 30}}}};
  GcloudRig rig(node, /*timeout_seconds=*/20, /*gcloud_timeout_seconds=*/0.5);
  const auto start = Steady::now();
  absl::Status s = rig.control->Reset(rig.Call());
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("tpu-vm stop tpu-1") && Catch::Contains("killed after"));
  CHECK(Steady::now() - start < std::chrono::seconds(5));
}

TEST_CASE("TPU gcloud: Start of a node stuck in STARTING fails at the timeout naming the state", "[tpu]") {
  json node = ReadyNode();
  node["state"] = "STOPPED";
  node["_standin"] = {{"after_start", {{"state", "STARTING"}, {"health", ""}}}};
  GcloudRig rig(node, /*timeout_seconds=*/2);
  absl::Status s = rig.control->Start(rig.Call());
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(s.message()),
             Catch::StartsWith("node projects/p/locations/z/nodes/tpu-1 stuck in STARTING for"));
}

TEST_CASE("TPU gcloud: Cancel kills a running gcloud promptly", "[tpu]") {
  json node = ReadyNode();
  node["_standin"] = {{"sleep", {{"describe", 30}}}};
  GcloudRig rig(node);
  CancelToken cancel;
  auto described = std::async(std::launch::async, [&] { return rig.control->Describe(&cancel); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Steady::now();
  cancel.Cancel();
  REQUIRE(described.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(described.get().status().code() == absl::StatusCode::kCancelled);
  CHECK(Steady::now() - start < std::chrono::seconds(1));
}

TEST_CASE("RunCommand: captures stdout, stderr and the exit status, NotFound for a missing program",
          "[tpu]") {
  CommandOptions options;
  absl::StatusOr<CommandResult> run =
      RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, options);
  REQUIRE(run.ok());
  CHECK(run->stdout_text == "out\n");
  CHECK(run->stderr_text == "err\n");
  CHECK(run->status.code == 3);
  CHECK(RunCommand({"/nonexistent/gcloud"}, options).status().code() == absl::StatusCode::kNotFound);
  CHECK(RunCommand({"no-such-program-tpud"}, options).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("RunCommand: a timeout kills the whole process group", "[tpu]") {
  testing::TempDir dir("tpud-run-test");
  const std::string marker = (dir.path() / "grandchild-ran").string();
  CommandOptions options;
  options.timeout = std::chrono::milliseconds(300);
  // The grandchild would touch the marker after 1 s unless the group is killed.
  absl::StatusOr<CommandResult> run =
      RunCommand({"/bin/sh", "-c", "(sleep 1; touch " + marker + ") & sleep 30"}, options);
  CHECK(run.status().code() == absl::StatusCode::kDeadlineExceeded);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  CHECK_FALSE(std::filesystem::exists(marker));
}

}  // namespace
}  // namespace tpud
