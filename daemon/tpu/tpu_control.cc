#include "daemon/tpu/tpu_control.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

using nlohmann::json;

// A string field of `object`, or "" when absent or not a string.
std::string Field(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<Symptom> ParseSymptoms(const json& node) {
  std::vector<Symptom> symptoms;
  auto it = node.find("symptoms");
  if (it == node.end() || !it->is_array()) return symptoms;
  for (const json& s : *it) {
    if (!s.is_object()) continue;
    symptoms.push_back(
        Symptom{Field(s, "createTime"), Field(s, "symptomType"), Field(s, "details"), Field(s, "workerId")});
  }
  return symptoms;
}

absl::StatusOr<std::string> MetadataValueOf(const MetadataClient& metadata, const char* key, const char* what,
                                            CancelToken* cancel) {
  absl::StatusOr<MetadataValue> value = metadata.Get(key, cancel);
  if (!value.ok()) {
    return absl::Status(
        value.status().code(),
        absl::StrCat("tpu ", what, " from metadata: ", std::string(value.status().message())));
  }
  return value->value;
}

}  // namespace

std::string TpuNode::Summary() const {
  std::string text = absl::StrCat("state ", state.empty() ? "(none)" : state);
  if (!health.empty()) absl::StrAppend(&text, ", health ", health);
  if (!health_description.empty()) absl::StrAppend(&text, " (", health_description, ")");
  return text;
}

absl::StatusOr<TpuNode> ParseNodeJson(const std::string& text) {
  json node = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!node.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("tpu node: not a JSON object: ", text.substr(0, 200)));
  }
  TpuNode out;
  out.name = Field(node, "name");
  out.state = Field(node, "state");
  out.health = Field(node, "health");
  out.health_description = Field(node, "healthDescription");
  out.accelerator_type = Field(node, "acceleratorType");
  out.symptoms = ParseSymptoms(node);
  return out;
}

std::string TpuTarget::ResourceName() const {
  return absl::StrCat("projects/", project, "/locations/", zone, "/nodes/", node);
}

absl::StatusOr<TpuTarget> ResolveTpuTarget(const TpuConfig& config, const MetadataClient& metadata,
                                           CancelToken* cancel) {
  TpuTarget target{config.project, config.zone, config.name};
  if (target.node.empty()) {
    const char* env = std::getenv("TPU_NAME");
    target.node = env != nullptr ? env : "";
  }
  if (target.node.empty() || target.node == "local") {
    return absl::FailedPreconditionError(
        "tpu.name is not set and $TPU_NAME does not name a node (it is \"local\" or unset on a TPU VM); "
        "set tpu.name to the node's name");
  }
  if (target.project.empty()) {
    absl::StatusOr<std::string> project = MetadataValueOf(metadata, "project/project-id", "project", cancel);
    if (!project.ok()) return project.status();
    target.project = *project;
  }
  if (target.zone.empty()) {
    // instance/zone is "projects/NUM/zones/ZONE" (reference §3).
    absl::StatusOr<std::string> zone = MetadataValueOf(metadata, "instance/zone", "zone", cancel);
    if (!zone.ok()) return zone.status();
    target.zone = zone->substr(zone->rfind('/') + 1);
  }
  if (target.project.empty() || target.zone.empty()) {
    return absl::FailedPreconditionError("tpu: the metadata server returned an empty project or zone");
  }
  return target;
}

}  // namespace tpud
