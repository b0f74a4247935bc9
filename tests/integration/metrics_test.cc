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
