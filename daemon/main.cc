// tpud: the supervisor daemon. Parses flags, loads the config, runs; or,
// with the `classify` subcommand, prints the verdict saved logs would get.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "daemon/app/classify_command.h"
#include "daemon/app/daemon_app.h"
#include "daemon/config/config.h"

int main(int argc, char** argv) {
  CLI::App app{"tpud: supervises Cloud TPU training jobs; restarts them from their last checkpoint."};
  std::string config_path = "/etc/tpud/tpud.yaml";
  bool check_only = false;
  std::string log_level = "info";
  app.add_option("-c,--config", config_path, "Config file (YAML)")->capture_default_str();
  app.add_flag("--check", check_only, "Validate the config and its job specs, then exit");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")->capture_default_str();
  app.set_version_flag("--version", std::string("tpud ") + tpud::TpudVersion());

  tpud::ClassifyOptions classify_options;
  CLI::App* classify = app.add_subcommand(
      "classify", "Print the failure verdict each log would get (class, action, rule, deciding line)");
  classify->add_option("--job", classify_options.job_spec, "Job spec YAML whose failure_rules apply first");
  classify->add_flag("--json", classify_options.json, "One JSON object per log, one per line");
  classify->add_option("--exit-code", classify_options.exit_code,
                       "Exit code each attempt is taken to have ended with")
      ->capture_default_str();
  classify->add_option("logs", classify_options.log_files, "Log files, each one attempt's output")
      ->required();
  CLI11_PARSE(app, argc, argv);
  if (*classify) return tpud::RunClassifyCommand(classify_options, std::cout, std::cerr);

  spdlog::set_default_logger(spdlog::stderr_color_mt("tpud"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");

  absl::StatusOr<tpud::DaemonConfig> config = tpud::LoadDaemonConfig(config_path);
  if (!config.ok()) {
    std::cerr << "tpud: " << config.status().message() << "\n";
    return 2;
  }
  if (check_only) {
    std::cout << config_path << ": OK (" << config->jobs.size() << " job(s))\n";
    return 0;
  }
  if (absl::Status s = tpud::RunDaemon(*config); !s.ok()) {
    std::cerr << "tpud: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
