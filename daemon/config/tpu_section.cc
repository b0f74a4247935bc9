#include "daemon/config/tpu_section.h"

#include <string>

#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"

namespace tpud::config_internal {
namespace {

constexpr absl::string_view kTpuKeys[] = {"name",          "project",     "zone",         "api_endpoint",
                                          "metadata_host", "gcloud_path", "device_globs", "lock_file",
                                          "reset",         "preflight",   "queued_resource"};
constexpr absl::string_view kResetKeys[] = {"backend",
                                            "timeout_seconds",
                                            "poll_interval_seconds",
                                            "stop_grace_seconds",
                                            "max_resets_per_hour",
                                            "backoff_initial_seconds",
                                            "backoff_max_seconds"};

constexpr absl::string_view kPreflightKeys[] = {"enabled", "require_devices"};

// TpuConfig fields that YAML writes under tpu.reset.
bool UnderReset(absl::string_view field) {
  return field == "backend" || field == "timeout_seconds" || field == "poll_interval_seconds" ||
         field == "stop_grace_seconds";
}

// Places a validation error ("tpu.FIELD: reason") at the key YAML writes it as.
void FailAtKey(Reader& r, const YAML::Node& root, const absl::Status& status) {
  const std::string message(status.message());
  const std::size_t colon = message.find(": ");
  std::string key = message.substr(0, colon);
  const std::string reason = colon == std::string::npos ? message : message.substr(colon + 2);
  const absl::string_view field = absl::StripPrefix(key, "tpu.");
  if (UnderReset(field)) key = absl::StrCat("tpu.reset.", field);
  r.Fail(MarkOf(root, root.Mark(), key), key, reason);
}

void ReadReset(Reader& r, const YAML::Node& tpu, DaemonConfig* config) {
  const std::optional<YAML::Node> reset = Section(r, tpu, "tpu", "reset", kResetKeys);
  if (!reset) return;
  const std::string where = "tpu.reset";
  Read(r, *reset, where, "backend", &config->tpu.backend);
  Read(r, *reset, where, "timeout_seconds", &config->tpu.timeout_seconds);
  Read(r, *reset, where, "poll_interval_seconds", &config->tpu.poll_interval_seconds);
  Read(r, *reset, where, "stop_grace_seconds", &config->tpu.stop_grace_seconds);
  Read(r, *reset, where, "max_resets_per_hour", &config->tpu_reset.max_resets_per_hour);
  Read(r, *reset, where, "backoff_initial_seconds", &config->tpu_reset.backoff_initial_seconds);
  Read(r, *reset, where, "backoff_max_seconds", &config->tpu_reset.backoff_max_seconds);
}

}  // namespace

void ReadTpuSection(Reader& r, const YAML::Node& root, DaemonConfig* config) {
  const std::optional<YAML::Node> tpu = Section(r, root, "", "tpu", kTpuKeys);
  if (!tpu) return;
  TpuConfig& c = config->tpu;
  const std::pair<const char*, std::string*> strings[] = {
      {"name", &c.name},
      {"project", &c.project},
      {"zone", &c.zone},
      {"api_endpoint", &c.api_endpoint},
      {"metadata_host", &c.metadata_host},
      {"gcloud_path", &c.gcloud_path},
      {"lock_file", &c.lock_file},
      {"queued_resource", &c.queued_resource},
  };
  for (const auto& [key, out] : strings) Read(r, *tpu, "tpu", key, out);
  ReadStrings(r, *tpu, "tpu", "device_globs", &c.device_globs);
  ReadReset(r, *tpu, config);
  if (const auto preflight = Section(r, *tpu, "tpu", "preflight", kPreflightKeys)) {
    Read(r, *preflight, "tpu.preflight", "enabled", &config->tpu_preflight.enabled);
    Read(r, *preflight, "tpu.preflight", "require_devices", &config->tpu_preflight.require_devices);
  }
  if (!r.ok()) return;
  absl::Status status = ValidateTpuConfig(c);
  if (status.ok()) status = ValidateTpuResetPolicy(config->tpu_reset);
  if (!status.ok()) FailAtKey(r, root, status);
}

}  // namespace tpud::config_internal
