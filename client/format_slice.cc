// tpuctl's views of a multi-host slice: the gang part of `tpuctl status NAME`
// (one row per worker) and `tpuctl slice`.
#include "client/format_slice.h"

#include <string>
#include <vector>

#include "client/format.h"
#include "client/format_internal.h"

namespace tpud::client {
namespace {

using internal::AddField;
using internal::Json;
using internal::kNone;
using internal::OrNone;

std::string Step(std::int64_t step) { return step >= 0 ? std::to_string(step) : std::string(kNone); }

std::string GangLine(const tpud::v1::GangStatus& gang) {
  std::string line = "generation " + std::to_string(gang.generation()) + ", " + OrNone(gang.phase());
  if (gang.phase() == "starting") line += gang.step() >= 0 ? " from step " + std::to_string(gang.step()) : " from scratch";
  return line;
}

}  // namespace

std::string FormatGang(const tpud::v1::GangStatus& gang) {
  std::string out;
  AddField(out, "gang", GangLine(gang));
  AddField(out, "gang reason", OrNone(gang.reason()));
  AddField(out, "gang restarts", std::to_string(gang.restarts()));
  if (!gang.waiting_for().empty()) AddField(out, "waiting for", gang.waiting_for());
  if (!gang.config_conflict().empty()) AddField(out, "CONFLICT", gang.config_conflict());
  if (gang.etcd_down_since_unix_ms() > 0) {
    AddField(out, "etcd", "unreachable since " + FormatUtcTime(gang.etcd_down_since_unix_ms()) + ": " +
                              OrNone(gang.etcd_error()) + " (the rows below are as last seen)");
  }
  std::vector<std::vector<std::string>> rows = {
      {"WORKER", "HOST", "TPUD", "STATE", "GEN", "ATTEMPT", "PID", "STEP", "REASON"}};
  for (const tpud::v1::WorkerJobStatus& w : gang.workers()) {
    const bool reported = w.state() != tpud::v1::JOB_STATE_UNSPECIFIED;
    rows.push_back({std::to_string(w.worker()), OrNone(w.host()), w.up() ? "up" : "lost",
                    reported ? StateName(w.state()) : std::string(kNone),
                    reported ? std::to_string(w.generation()) : std::string(kNone),
                    reported ? std::to_string(w.attempt()) : std::string(kNone),
                    w.pid() != 0 ? std::to_string(w.pid()) : std::string(kNone), Step(w.last_step()),
                    OrNone(w.reason())});
  }
  return out + internal::RenderTable(rows);
}

namespace internal {

std::string GangSummary(const tpud::v1::GangStatus& gang) {
  int running = 0;
  int lost = 0;
  for (const tpud::v1::WorkerJobStatus& w : gang.workers()) {
    if (!w.up()) {
      ++lost;
    } else if (w.state() == tpud::v1::JOB_STATE_RUNNING) {
      ++running;
    }
  }
  std::string line = "gang generation " + std::to_string(gang.generation()) + " " + OrNone(gang.phase()) + ": " +
                     std::to_string(running) + " of " + std::to_string(gang.workers_size()) + " workers running";
  if (lost > 0) line += ", " + std::to_string(lost) + " lost";
  if (gang.etcd_down_since_unix_ms() > 0) {
    line += " (as last seen: etcd unreachable since " + FormatUtcTime(gang.etcd_down_since_unix_ms()) + ")";
  }
  if (!gang.config_conflict().empty()) line += "; CONFLICT: " + gang.config_conflict();
  return line;
}

Json GangJson(const tpud::v1::GangStatus& gang) {
  Json workers = Json::array();
  for (const tpud::v1::WorkerJobStatus& w : gang.workers()) {
    const bool reported = w.state() != tpud::v1::JOB_STATE_UNSPECIFIED;
    workers.push_back({{"worker", w.worker()},
                       {"host", w.host()},
                       {"up", w.up()},
                       {"state", reported ? Json(StateName(w.state())) : Json(nullptr)},
                       {"reason", w.reason()},
                       {"generation", w.generation()},
                       {"attempt", w.attempt()},
                       {"pid", w.pid() != 0 ? Json(w.pid()) : Json(nullptr)},
                       {"last_step", internal::KnownOrNull(w.last_step())},
                       {"state_since", internal::TimeJson(w.state_since_unix_ms())}});
  }
  Json by_reason = Json::object();
  for (const auto& [reason, count] : gang.restarts_by_reason()) by_reason[reason] = count;
  return {{"generation", gang.generation()},
          {"phase", gang.phase()},
          {"reason", gang.reason()},
          {"step", internal::KnownOrNull(gang.step())},
          {"restarts", gang.restarts()},
          {"restarts_by_reason", by_reason},
          {"waiting_for", gang.waiting_for()},
          {"etcd_down_since", internal::TimeJson(gang.etcd_down_since_unix_ms())},
          {"etcd_error", gang.etcd_error()},
          {"config_conflict", gang.config_conflict()},
          {"workers", workers}};
}

}  // namespace internal

std::string FormatSlice(const tpud::v1::GetSliceResponse& slice) {
  if (!slice.configured()) return "no slice: this tpud's config has no slice: section\n";
  std::string out;
  AddField(out, "slice", slice.slice());
  AddField(out, "this worker", std::to_string(slice.worker_id()) + " of " + std::to_string(slice.num_workers()));
  if (!slice.member_conflict().empty()) AddField(out, "NOT JOINED", slice.member_conflict());
  AddField(out, "leader", slice.leader() >= 0 ? "worker " + std::to_string(slice.leader()) : std::string(kNone));
  if (!slice.config_conflict().empty()) AddField(out, "CONFLICT", slice.config_conflict());
  std::string etcd = slice.etcd_up() ? "up" : "down: " + OrNone(slice.etcd_error());
  if (!slice.etcd_up() && slice.etcd_down_since_unix_ms() > 0) {
    etcd = "unreachable since " + FormatUtcTime(slice.etcd_down_since_unix_ms()) + ": " + OrNone(slice.etcd_error());
  }
  AddField(out, "etcd", etcd);
  std::vector<std::vector<std::string>> members = {{"WORKER", "HOST", "TPUD", "VERSION", "LEADER"}};
  for (const tpud::v1::SliceMember& m : slice.members()) {
    members.push_back({std::to_string(m.worker()), OrNone(m.host()), m.up() ? "up" : "lost", OrNone(m.version()),
                       m.leader() ? "*" : ""});
  }
  out += "\n" + internal::RenderTable(members);
  if (slice.gangs_size() > 0) {
    std::vector<std::vector<std::string>> gangs = {{"GANG", "GENERATION", "PHASE", "STEP", "RESTARTS", "REASON"}};
    for (const tpud::v1::GangSummary& g : slice.gangs()) {
      gangs.push_back({g.job(), std::to_string(g.gang().generation()), g.gang().phase(), Step(g.gang().step()),
                       std::to_string(g.gang().restarts()),
                       OrNone(g.gang().waiting_for().empty() ? g.gang().reason()
                                                             : "waiting for " + g.gang().waiting_for())});
    }
    out += "\n" + internal::RenderTable(gangs);
  }
  if (slice.endpoints_size() > 0) {
    std::vector<std::vector<std::string>> endpoints = {{"ETCD", "HEALTH", "LEADER", "VERSION", "ERROR"}};
    for (const tpud::v1::EtcdEndpoint& e : slice.endpoints()) {
      endpoints.push_back({e.endpoint(), e.healthy() ? "healthy" : "unhealthy", e.leader() ? "*" : "",
                           OrNone(e.version()), e.error()});
    }
    out += "\n" + internal::RenderTable(endpoints);
  }
  return out;
}

std::string SliceJson(const tpud::v1::GetSliceResponse& slice) {
  Json members = Json::array();
  for (const tpud::v1::SliceMember& m : slice.members()) {
    members.push_back({{"worker", m.worker()}, {"host", m.host()}, {"up", m.up()}, {"version", m.version()},
                       {"leader", m.leader()}});
  }
  Json gangs = Json::array();
  for (const tpud::v1::GangSummary& g : slice.gangs()) {
    Json gang = internal::GangJson(g.gang());
    gang["job"] = g.job();
    gangs.push_back(gang);
  }
  Json endpoints = Json::array();
  for (const tpud::v1::EtcdEndpoint& e : slice.endpoints()) {
    endpoints.push_back({{"endpoint", e.endpoint()}, {"healthy", e.healthy()}, {"leader", e.leader()},
                         {"version", e.version()}, {"error", e.error()}});
  }
  return internal::Dump({{"configured", slice.configured()},
                         {"slice", slice.slice()},
                         {"worker_id", slice.worker_id()},
                         {"num_workers", slice.num_workers()},
                         {"leader", slice.leader() >= 0 ? Json(slice.leader()) : Json(nullptr)},
                         {"etcd_up", slice.etcd_up()},
                         {"etcd_error", slice.etcd_error()},
                         {"member_conflict", slice.member_conflict()},
                         {"config_conflict", slice.config_conflict()},
                         {"etcd_down_since", internal::TimeJson(slice.etcd_down_since_unix_ms())},
                         {"members", members},
                         {"gangs", gangs},
                         {"etcd_endpoints", endpoints}});
}

}  // namespace tpud::client
