// The `tpu:` section of tpud.yaml (daemon/config/tpu_section.h): defaults,
// every key, and errors naming the file, line and key.
#include <catch2/catch.hpp>
#include <string>

#include "daemon/config/config.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

absl::StatusOr<DaemonConfig> LoadYaml(const testing::TempDir& dir, const std::string& yaml) {
  return LoadDaemonConfig(dir.File("tpud.yaml", yaml));
}

TEST_CASE("Config tpu: absent means backend none and the default policy", "[config][tpu]") {
  testing::TempDir dir;
  const absl::StatusOr<DaemonConfig> config = LoadYaml(dir, "socket: /tmp/x.sock\n");
  REQUIRE(config.ok());
  CHECK(config->tpu.backend == "none");
  CHECK(config->tpu.name.empty());  // $TPU_NAME when a reset needs it.
  CHECK(config->tpu_reset == TpuResetPolicy{});
}

TEST_CASE("Config tpu: every key is read", "[config][tpu]") {
  testing::TempDir dir;
  const absl::StatusOr<DaemonConfig> config = LoadYaml(dir,
                                                       "tpu:\n"
                                                       "  name: n\n"
                                                       "  project: p\n"
                                                       "  zone: z\n"
                                                       "  api_endpoint: http://127.0.0.1:8080\n"
                                                       "  metadata_host: 127.0.0.1:9090\n"
                                                       "  gcloud_path: /opt/gcloud\n"
                                                       "  device_globs: [/dev/accel*]\n"
                                                       "  lock_file: /run/lock\n"
                                                       "  reset:\n"
                                                       "    backend: api\n"
                                                       "    timeout_seconds: 30\n"
                                                       "    poll_interval_seconds: 0.5\n"
                                                       "    stop_grace_seconds: 2\n"
                                                       "    max_resets_per_hour: 3\n"
                                                       "    backoff_initial_seconds: 5\n"
                                                       "    backoff_max_seconds: 50\n");
  REQUIRE(config.ok());
  const TpuConfig& tpu = config->tpu;
  CHECK(tpu.name == "n");
  CHECK(tpu.project == "p");
  CHECK(tpu.zone == "z");
  CHECK(tpu.api_endpoint == "http://127.0.0.1:8080");
  CHECK(tpu.metadata_host == "127.0.0.1:9090");
  CHECK(tpu.gcloud_path == "/opt/gcloud");
  CHECK(tpu.device_globs == std::vector<std::string>{"/dev/accel*"});
  CHECK(tpu.lock_file == "/run/lock");
  CHECK(tpu.backend == "api");
  CHECK(tpu.timeout_seconds == 30);
  CHECK(tpu.poll_interval_seconds == 0.5);
  CHECK(tpu.stop_grace_seconds == 2);
  CHECK(config->tpu_reset == TpuResetPolicy{3, 5, 50});
}

TEST_CASE("Config tpu: errors name the file, line and key", "[config][tpu]") {
  testing::TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  const std::pair<std::string, std::string> cases[] = {
      {"tpu:\n  reset:\n    backend: magic\n",
       ":3: tpu.reset.backend: must be one of none, api, gcloud, local; got \"magic\""},
      {"tpu:\n  reset:\n    backend: api\n    timeout_seconds: 0\n",
       ":4: tpu.reset.timeout_seconds: must be > 0, got 0"},
      {"tpu:\n  api_endpoint: tpu.googleapis.com\n",
       ":2: tpu.api_endpoint: must start with http:// or https://, got \"tpu.googleapis.com\""},
      {"tpu:\n  reset: {max_resets_per_hour: -1}\n", ":2: tpu.reset.max_resets_per_hour: must be >= 0, got -1"},
      {"tpu:\n  reset: {timeout: 5}\n", ":2: tpu.reset.timeout: unknown key"},
      {"tpu:\n  nmae: x\n", ":2: tpu.nmae: unknown key"},
  };
  for (const auto& [yaml, want] : cases) {
    INFO(yaml);
    const absl::StatusOr<DaemonConfig> config = LoadYaml(dir, yaml);
    REQUIRE_FALSE(config.ok());
    CHECK_THAT(std::string(config.status().message()), Catch::StartsWith(file + want));
  }
}

}  // namespace
}  // namespace tpud
