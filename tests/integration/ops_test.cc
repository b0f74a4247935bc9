// The operations kit against the real thing (README "Operations kit"): a real
// Prometheus, configured from ops/prometheus/scrape-tpud.yml and loading
// ops/prometheus/tpud-alerts.yml, scrapes a real tpud whose job hangs, gets a
// (local) TPU reset and recovers; then every query of the Grafana dashboard
// (ops/grafana/tpud-dashboard.json), its variables' included, is evaluated
// through Prometheus' HTTP API. Each must parse, and each must return series
// unless its panel (or its row) is marked multi-host: a description starting
// with "multi-host:" (metrics of a slice, absent on a single VM).
#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"
#include "tests/integration/prometheus_fixture.h"

namespace tpud::testing {
namespace {

using json = nlohmann::json;

const std::string kOpsDir = std::string(TPUD_SOURCE_DIR) + "/ops";
constexpr char kMultiHostMark[] = "multi-host:";

// One query the dashboard makes; for a variable, the expression inside
// label_values() and the label it lists.
struct DashboardQuery {
  std::string where;  // "panel \"Title\"" or "variable NAME".
  std::string expr;
  std::string label;  // Variables only.
  bool multi_host = false;
};

json ReadJson(const std::string& path) {
  json parsed = json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw std::runtime_error(path + ": not JSON");
  return parsed;
}

bool MarkedMultiHost(const json& panel) {
  return panel.value("description", "").rfind(kMultiHostMark, 0) == 0;
}

void AddPanelQueries(const json& panel, bool in_multi_host_row, std::vector<DashboardQuery>& out) {
  const bool multi_host = in_multi_host_row || MarkedMultiHost(panel);
  for (const json& target : panel.value("targets", json::array())) {
    out.push_back({"panel \"" + panel.value("title", "") + "\"", target.at("expr").get<std::string>(), "",
                   multi_host});
  }
  for (const json& nested : panel.value("panels", json::array())) AddPanelQueries(nested, multi_host, out);
}

// Every panel target and every variable query, rows' nested panels included.
// A row marked multi-host marks the panels after it, up to the next row.
std::vector<DashboardQuery> DashboardQueries(const json& dashboard) {
  std::vector<DashboardQuery> out;
  bool in_multi_host_row = false;
  for (const json& panel : dashboard.at("panels")) {
    if (panel.value("type", "") == "row") in_multi_host_row = MarkedMultiHost(panel);
    AddPanelQueries(panel, in_multi_host_row, out);
  }
  const std::regex label_values(R"(^label_values\((.*),\s*(\w+)\)$)");
  for (const json& variable : dashboard.at("templating").at("list")) {
    const std::string query = variable.at("definition").get<std::string>();
    std::smatch m;
    if (!std::regex_match(query, m, label_values)) throw std::runtime_error("variable query: " + query);
    out.push_back({"variable " + variable.at("name").get<std::string>(), m[1], m[2], false});
  }
  return out;
}

// The dashboard's variables as Grafana fills them with "All" (allValue .*),
// and $__rate_interval as it would be for a 1 s scrape interval.
std::string ForPrometheus(std::string expr) {
  expr = std::regex_replace(expr, std::regex(R"(\$\{?(instance|job)\}?)"), ".*");
  expr = std::regex_replace(expr, std::regex(R"(\$\{?__rate_interval\}?)"), "1m");
  if (expr.find('$') != std::string::npos) throw std::runtime_error("unknown variable in " + expr);
  return expr;
}

// Why `query` does not pass yet ("" when it does).
std::string Check(const PrometheusProcess& prometheus, const DashboardQuery& query) {
  const json got = prometheus.Query(ForPrometheus(query.expr));
  if (got.value("status", "") != "success") return "error: " + got.value("error", got.dump());
  const json& series = got["data"]["result"];
  if (series.empty()) return query.multi_host ? "" : "no series";
  if (!query.label.empty() && !series[0]["metric"].contains(query.label)) return "no label " + query.label;
  return "";
}

// Attempt 1 reports progress, writes a checkpoint at step 2 and goes silent;
// later attempts make progress until stopped.
constexpr char kHangsOnceScript[] = R"(
if [ "$TPUD_ATTEMPT" = 1 ]; then
  echo "step=1"; echo "step=2"; : > "$CKPT/ckpt-2"
  exec sleep 600
fi
s=${TPUD_CHECKPOINT_STEP:-0}
while :; do s=$((s + 1)); echo "step=$s"; sleep 0.1; done
)";

// scrape-tpud.yml, scraping `address` every second.
std::string ScrapeConfigFor(const std::string& address) {
  std::string config = ReadFile(kOpsDir + "/prometheus/scrape-tpud.yml");
  const std::string target = R"(["localhost:9464"])", interval = "scrape_interval: 15s";
  const auto at = config.find(target);
  if (at == std::string::npos || config.find(interval) == std::string::npos) {
    throw std::runtime_error("scrape-tpud.yml: no " + target + " or " + interval + " to replace");
  }
  config.replace(at, target.size(), "[\"" + address + "\"]");
  return std::regex_replace(config, std::regex(interval), "scrape_interval: 1s");
}

}  // namespace

TEST_CASE("Ops kit: the dashboard is import-ready Grafana JSON: datasource input, unique ids, "
          "panels on the 24-column grid", "[integration][ops]") {
  const json dashboard = ReadJson(kOpsDir + "/grafana/tpud-dashboard.json");
  REQUIRE(dashboard["__inputs"][0]["name"] == "DS_PROMETHEUS");
  CHECK(dashboard["__inputs"][0]["pluginId"] == "prometheus");
  CHECK(dashboard["schemaVersion"].get<int>() >= 36);  // Datasources as {type, uid} objects.
  CHECK(dashboard["uid"] == "tpud-overview");
  CHECK(dashboard["id"].is_null());
  std::set<int> ids;
  int targets = 0;
  for (const json& panel : dashboard["panels"]) {
    INFO("panel " << panel.dump().substr(0, 200));
    CHECK(ids.insert(panel["id"].get<int>()).second);
    const json& grid = panel["gridPos"];
    CHECK(grid["x"].get<int>() + grid["w"].get<int>() <= 24);
    if (panel["type"] == "row") continue;
    CHECK(panel["datasource"]["uid"] == "${DS_PROMETHEUS}");
    CHECK_FALSE(panel["targets"].empty());
    for (const json& target : panel["targets"]) {
      CHECK(target["datasource"]["uid"] == "${DS_PROMETHEUS}");
      ++targets;
    }
  }
  CHECK(targets >= 20);
  for (const json& variable : dashboard["templating"]["list"]) {
    CHECK(variable["datasource"]["uid"] == "${DS_PROMETHEUS}");
  }
}

TEST_CASE("Ops kit: Prometheus scraping a tpud whose job hung and recovered answers every dashboard "
          "query, and the hang alert fires", "[integration][ops]") {
  TempDir dir;
  const auto ckpt = dir / "ckpt";
  std::filesystem::create_directories(ckpt);
  const std::string tpu_yaml = "gce_metadata: {enabled: \"false\"}\n"
                               "tpu:\n"
                               "  device_globs: [" + YamlQuote((dir / "dev").string() + "/accel*") + "]\n" +
                               "  lock_file: " + YamlQuote((dir / "libtpu_lockfile").string()) + "\n" +
                               "  reset: {backend: local, timeout_seconds: 30}";
  TpudProcess tpud(dir,
                   ShellJob("trainer", kHangsOnceScript,
                            "  env: {CKPT: " + YamlQuote(ckpt.string()) + "}\n" +
                                "  checkpoint: {dir: " + YamlQuote(ckpt.string()) +
                                ", layout: pattern, pattern: 'ckpt-(\\d+)'}\n" +
                                "  progress: {regex: 'step=(\\d+)', startup_grace_seconds: 2, timeout_seconds: 1}\n"
                                "  stop: {grace_seconds: 1}\n"
                                "  restart: {max_restarts: 3, backoff_initial_seconds: 0.2, backoff_jitter: 0}\n"),
                   tpu_yaml);
  const std::string metrics = tpud.Info()["metrics_address"].get<std::string>();
  PrometheusProcess prometheus(dir, "rule_files: [" + YamlQuote(kOpsDir + "/prometheus/tpud-alerts.yml") + "]\n" +
                                        ScrapeConfigFor(metrics));
  const auto scraped = [&](const std::string& expr) {
    const json got = prometheus.Query(expr);
    return got.value("status", "") == "success" && !got["data"]["result"].empty();
  };
  // Prometheus sees the job before it ever ran, as it would in production.
  REQUIRE(WaitFor([&] { return scraped(R"(tpud_job_state{job="trainer", state="stopped"} == 1)"); }, Seconds(20)));

  REQUIRE(tpud.Tpuctl({"start", "trainer"}).exit_code == 0);
  REQUIRE(WaitFor(
      [&] {
        const json status = tpud.Status("trainer");
        return status["attempt"] == 2 && status["state"] == "running" && status.value("last_step", 0) >= 5;
      },
      Seconds(30)));
  const json incident = WaitForClosedIncident(tpud, "trainer", 1);
  INFO("incident: " << incident.dump());
  REQUIRE(incident["class"] == "hang");
  CHECK(incident["reset_backend"] == "local");

  const std::vector<DashboardQuery> queries = DashboardQueries(ReadJson(kOpsDir + "/grafana/tpud-dashboard.json"));
  REQUIRE(queries.size() >= 20);
  std::string failing;
  // Recording rules need a few evaluations, increase() two samples.
  const bool all_pass = WaitFor(
      [&] {
        failing.clear();
        for (const DashboardQuery& query : queries) {
          const std::string why = Check(prometheus, query);
          if (!why.empty()) failing += query.where + ": " + query.expr + ": " + why + "\n";
        }
        return failing.empty();
      },
      Seconds(30));
  INFO("failing queries:\n" << failing << "prometheus log:\n" << prometheus.LogText());
  CHECK(all_pass);
  // Parsing is not enough for a multi-host query: Prometheus must accept it too.
  for (const DashboardQuery& query : queries) {
    if (query.multi_host) CHECK(prometheus.Query(ForPrometheus(query.expr))["status"] == "success");
  }

  CHECK(WaitFor([&] { return scraped(R"(ALERTS{alertname="TpudJobHung", alertstate="firing", job="trainer"})"); },
                Seconds(20)));
  CHECK(scraped(R"(tpud_tpu_resets_total{backend="local", result="ok"} >= 1)"));
  CHECK_FALSE(scraped(R"(ALERTS{alertname=~"TpudDown|TpudJobFailed|TpudTpuResetFailing|TpudStateStoreError"})"));
}

}  // namespace tpud::testing
