#include "client/format_tpu.h"

#include "client/format.h"
#include "client/format_internal.h"

namespace tpud::client {
namespace {

using internal::AddField;
using internal::Json;
using internal::OrNone;

Json NodeJson(const tpud::v1::TpuNode& node) {
  Json symptoms = Json::array();
  for (const auto& s : node.symptoms()) {
    symptoms.push_back({{"create_time", s.create_time()},
                        {"symptom_type", s.symptom_type()},
                        {"details", s.details()},
                        {"worker_id", s.worker_id()}});
  }
  return {{"name", node.name()},
          {"state", node.state()},
          {"health", node.health()},
          {"health_description", node.health_description()},
          {"accelerator_type", node.accelerator_type()},
          {"symptoms", symptoms}};
}

Json ResetJson(const tpud::v1::TpuReset& r) {
  return {{"job", r.job()},           {"rung", r.rung()},
          {"why", r.why()},           {"attempted", r.attempted()},
          {"backend", r.backend()},   {"duration_seconds", r.duration_seconds()},
          {"result", r.result()},     {"finished", internal::TimeJson(r.finished_unix_ms())}};
}

std::string NodeLine(const tpud::v1::TpuNode& node) {
  return node.accelerator_type().empty() ? OrNone(node.name())
                                         : OrNone(node.name()) + " (" + node.accelerator_type() + ")";
}

void AddNode(std::string& out, const tpud::v1::GetTpuResponse& tpu) {
  if (!tpu.has_node()) {
    AddField(out, "node", "unknown: " + OrNone(tpu.node_error()));
    return;
  }
  const tpud::v1::TpuNode& node = tpu.node();
  AddField(out, "node", NodeLine(node));
  AddField(out, "state", OrNone(node.state()));
  AddField(out, "health", node.health_description().empty() ? OrNone(node.health())
                                                            : OrNone(node.health()) + ": " + node.health_description());
  if (node.symptoms().empty()) AddField(out, "symptoms", "-");
  if (!node.symptoms().empty()) out += "symptoms:\n";
  for (const auto& s : node.symptoms()) {
    out += "  " + OrNone(s.create_time()) + " " + OrNone(s.symptom_type()) + " worker " + OrNone(s.worker_id()) +
           (s.details().empty() ? "" : ": " + FormatMatchedLine(s.details(), 100)) + "\n";
  }
}

std::string LastReset(const tpud::v1::TpuReset& r) {
  std::string text = FormatTpuReset(r);
  if (!r.job().empty()) text += " for job " + r.job();
  if (r.finished_unix_ms() > 0) text += " at " + FormatUtcTime(r.finished_unix_ms());
  return text;
}

}  // namespace

std::string FormatTpu(const tpud::v1::GetTpuResponse& tpu) {
  std::string out;
  AddField(out, "backend", OrNone(tpu.backend()));
  AddNode(out, tpu);
  AddField(out, "resets", std::to_string(tpu.resets_last_hour()) + " in the last hour (max " +
                              std::to_string(tpu.max_resets_per_hour()) + ")");
  std::string running = OrNone(tpu.running());
  if (tpu.queued() > 0) running += " (" + std::to_string(tpu.queued()) + " queued)";
  AddField(out, "running", running);
  AddField(out, "last reset", tpu.has_last_reset() ? LastReset(tpu.last_reset()) : "-");
  return out;
}

std::string TpuJson(const tpud::v1::GetTpuResponse& tpu) {
  const Json out = {{"backend", tpu.backend()},
                    {"node", tpu.has_node() ? NodeJson(tpu.node()) : Json(nullptr)},
                    {"node_error", tpu.node_error()},
                    {"resets_last_hour", tpu.resets_last_hour()},
                    {"max_resets_per_hour", tpu.max_resets_per_hour()},
                    {"running", tpu.running()},
                    {"queued", tpu.queued()},
                    {"last_reset", tpu.has_last_reset() ? ResetJson(tpu.last_reset()) : Json(nullptr)}};
  return internal::Dump(out);
}

std::string FormatTpuReset(const tpud::v1::TpuReset& r) {
  if (!r.attempted()) return "TPU reset: nothing to do";
  const std::string what = "TPU reset (" + OrNone(r.backend()) + ")";
  if (r.result() == "ok") return what + " done in " + FormatDowntime(r.duration_seconds());
  return what + " failed after " + FormatDowntime(r.duration_seconds()) + ": " + FormatMatchedLine(r.result(), 200);
}

namespace {

void AddChecks(std::string& out, const std::string& indent,
               const google::protobuf::RepeatedPtrField<tpud::v1::DoctorCheck>& checks) {
  for (const auto& check : checks) {
    std::string name = check.name();
    name.resize(std::max<std::size_t>(name.size(), 12), ' ');
    out += indent + (check.ok() ? "\u2713 " : "\u2717 ") + name + " " + check.detail() + "\n";
    if (!check.ok() && !check.fix().empty()) out += indent + "    fix: " + check.fix() + "\n";
  }
}

}  // namespace

std::string FormatDoctor(const tpud::v1::DoctorResponse& doctor) {
  std::string out = "TPU reset backend: " + OrNone(doctor.backend()) + "\n";
  for (const auto& job : doctor.jobs()) {
    std::string indent = "";
    if (!job.job().empty()) {
      out += "job " + job.job() + ":\n";
      indent = "  ";
    }
    AddChecks(out, indent, job.checks());
  }
  if (doctor.slice_size() > 0) {
    out += "slice:\n";
    AddChecks(out, "  ", doctor.slice());
  }
  return out;
}

int FailedChecks(const tpud::v1::DoctorResponse& doctor) {
  int failed = 0;
  for (const auto& job : doctor.jobs()) {
    for (const auto& check : job.checks()) failed += check.ok() ? 0 : 1;
  }
  for (const auto& check : doctor.slice()) failed += check.ok() ? 0 : 1;
  return failed;
}

}  // namespace tpud::client
