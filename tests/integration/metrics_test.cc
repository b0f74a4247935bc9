// The Prometheus endpoint: scraped over HTTP (HttpGet, libcurl) from the address tpud
// reports in `tpuctl info --json`, and checked with promtool.
#include <catch2/catch.hpp>
#include <iostream>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

}  // namespace

TEST_CASE("tpud: /metrics on the reported address shows job states and passes promtool",
          "[integration]") {
  TempDir dir;
  TpudProcess tpud(dir, R"(
- name: ticker
  command: [/bin/sh, -c, 'while :; do sleep 0.1; done']
  start_seconds: 0.2
)");
  REQUIRE(tpud.Tpuctl({"start", "ticker"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("ticker", "running")["state"] == "running");
  const std::string address = tpud.Info()["metrics_address"].get<std::string>();
  REQUIRE_THAT(address, StartsWith("127.0.0.1:"));
  REQUIRE(address != "127.0.0.1:0");

  const HttpResult scrape = HttpGet("http://" + address + "/metrics");
  INFO("curl: " << scrape.error);
  REQUIRE(scrape.status == 200);
  CHECK_THAT(scrape.body, Contains("tpud_job_state{job=\"ticker\",state=\"running\"} 1"));
  CHECK_THAT(scrape.body, Contains("tpud_job_state{job=\"ticker\",state=\"stopped\"} 0"));
  CHECK_THAT(scrape.body, Contains("tpud_build_info{"));

  const auto file = dir.WriteFile("metrics.txt", scrape.body);
  const CommandResult promtool = RunCommand({"promtool", "check", "metrics"}, Seconds(30), file);
  if (promtool.exit_code != 0 || !promtool.out.empty() || !promtool.err.empty()) {
    std::cerr << "promtool check metrics (exit " << promtool.exit_code << "):\n"
              << promtool.out << promtool.err;
  }
  INFO("promtool:\n" << promtool.out << promtool.err << "\nscraped:\n" << scrape.body);
  CHECK(promtool.exit_code == 0);
}

}  // namespace tpud::testing

namespace tpud::testing {

TEST_CASE("tpud: goodput and badput by cause in /metrics and tpuctl status after a restart",
          "[integration]") {
  TempDir dir;
  const std::string marker = (dir / "failed-once").string();
  TpudProcess tpud(dir, R"(
- name: trainer
  command: [/bin/sh, -c, 'echo step=1; sleep 0.3; echo step=2; if [ ! -e )" + marker +
                            R"( ]; then touch )" + marker + R"(; exit 1; fi; while :; do sleep 0.1; done']
  start_seconds: 0
  progress: {regex: '^step=(\d+)', timeout_seconds: 0}
  restart: {backoff_initial_seconds: 0.5, backoff_max_seconds: 0.5, backoff_jitter: 0}
)");
  REQUIRE(tpud.Tpuctl({"start", "trainer"}).exit_code == 0);
  // Attempt 2 has made progress: step=2 comes 0.3 s after its first progress line.
  REQUIRE(WaitFor(
      [&] {
        const nlohmann::json status = tpud.Status("trainer");
        return status["attempt"] == 2 && status["last_step"] == 2;
      },
      Seconds(10)));

  const nlohmann::json goodput = tpud.Status("trainer")["goodput"];
  INFO("goodput: " << goodput.dump());
  REQUIRE(goodput.is_object());
  // Attempt 1 started from scratch and so did attempt 2: its 0.3 s of progress was redone.
  CHECK(goodput["badput_seconds"]["wasted_progress"].get<double>() >= 0.25);
  CHECK(goodput["badput_seconds"]["recovery"].get<double>() >= 0.45);
  CHECK(goodput["productive_seconds"].get<double>() > 0.2);
  CHECK(goodput["ratio"].get<double>() > 0.0);
  CHECK(goodput["ratio"].get<double>() < 1.0);
  CHECK_THAT(tpud.Tpuctl({"status", "trainer"}).out, Contains("goodput:"));

  const HttpResult scrape = HttpGet("http://" + tpud.Info()["metrics_address"].get<std::string>() + "/metrics");
  REQUIRE(scrape.status == 200);
  CHECK_THAT(scrape.body, Contains("# TYPE tpud_job_goodput_ratio gauge"));
  CHECK_THAT(scrape.body, Contains("tpud_job_goodput_ratio{job=\"trainer\"} 0."));
  CHECK_THAT(scrape.body, Contains("tpud_job_badput_seconds{job=\"trainer\",cause=\"recovery\"} "));
  CHECK_THAT(scrape.body, Contains("tpud_job_badput_seconds{job=\"trainer\",cause=\"hang_detection\"} 0\n"));
}

}  // namespace tpud::testing
