// A real Prometheus for the ops kit tests (ops_test.cc): Debian's `prometheus`
// binary, with its config and TSDB in a temp dir, listening on a free
// loopback port, queried through its HTTP API
// (https://prometheus.io/docs/prometheus/latest/querying/api/).
//
// Thread-safety: none; use from the test's thread only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tests/integration/harness.h"

namespace tpud::testing {

class PrometheusProcess {
 public:
  // Writes dir/prometheus.yml: scrape and rule evaluation every second, then
  // `config_yaml` (top-level keys at column 0: rule_files, scrape_configs).
  // Starts `prometheus` (from PATH) on 127.0.0.1 with its TSDB in
  // dir/prometheus-data and its log in dir/prometheus.log, and waits up to
  // 30 s until it is ready (/-/ready). Throws std::runtime_error, with its
  // log, when it exits or never gets ready.
  PrometheusProcess(const TempDir& dir, const std::string& config_yaml);
  // SIGTERM, then SIGKILL after 10 s.
  ~PrometheusProcess();
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  // GET /api/v1/query?query=EXPR, evaluated now: the parsed response, whose
  // "status" is "success" (the series in ["data"]["result"]) or "error" (the
  // reason in ["error"]; also when the request itself failed).
  nlohmann::json Query(const std::string& expr) const;

  std::string LogText() const { return ReadFile(log_path_); }
  const std::string& address() const { return address_; }

 private:
  void Stop();

  std::string address_;  // "127.0.0.1:PORT".
  std::filesystem::path log_path_;
  int pid_ = -1;
};

}  // namespace tpud::testing
