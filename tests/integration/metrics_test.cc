// The Prometheus endpoint: scraped over HTTP (libcurl) from the address tpud
// reports in `tpuctl info --json`, and checked with promtool.
#include <curl/curl.h>

#include <catch2/catch.hpp>
#include <iostream>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

struct HttpResponse {
  long status = 0;      // HTTP status; 0 when the request failed.
  std::string body;
  std::string error;    // curl's message when status is 0.
};

std::size_t AppendBody(char* data, std::size_t size, std::size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

// GET `url`, at most 10 s.
HttpResponse HttpGet(const std::string& url) {
  HttpResponse response;
  CURL* curl = curl_easy_init();
  REQUIRE(curl != nullptr);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  } else {
    response.error = curl_easy_strerror(code);
  }
  curl_easy_cleanup(curl);
  return response;
}

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

  const HttpResponse scrape = HttpGet("http://" + address + "/metrics");
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
