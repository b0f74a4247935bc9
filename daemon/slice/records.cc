#include "daemon/slice/records.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"

namespace tpud::slice {
namespace {

using nlohmann::json;

json CauseJson(const GangCause& cause) {
  json j = {{"worker", cause.worker},
            {"class", FailureClassName(cause.failure_class)},
            {"action", RecoveryActionName(cause.action)},
            {"rule", cause.rule},
            {"counted", cause.counted}};
  if (cause.step) j["step"] = *cause.step;
  return j;
}

GangCause CauseFrom(const json& j) {
  GangCause cause;
  cause.worker = j.at("worker").get<int>();
  const std::string failure_class = j.at("class").get<std::string>();
  const std::string action = j.at("action").get<std::string>();
  cause.failure_class = ParseFailureClass(failure_class).value_or(FailureClass::kUnknown);
  cause.action = ParseRecoveryAction(action).value_or(RecoveryAction::kRestart);
  cause.rule = j.value("rule", "");
  cause.counted = j.value("counted", false);
  if (j.contains("step")) cause.step = j.at("step").get<std::int64_t>();
  return cause;
}

template <typename T, typename Parse>
absl::StatusOr<T> Decode(const std::string& text, const char* what, Parse parse) {
  try {
    return parse(json::parse(text));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad ", what, " record in etcd: ", e.what()));
  }
}

json RestartJson(const RestartPolicy& restart) {
  return {{"max_restarts", restart.max_restarts},
          {"backoff_initial_seconds", restart.backoff_initial_seconds},
          {"backoff_max_seconds", restart.backoff_max_seconds},
          {"backoff_jitter", restart.backoff_jitter},
          {"reset_after_seconds", restart.reset_after_seconds}};
}

RestartPolicy RestartFromJson(const json& r) {
  RestartPolicy restart;
  restart.max_restarts = r.value("max_restarts", restart.max_restarts);
  restart.backoff_initial_seconds = r.value("backoff_initial_seconds", restart.backoff_initial_seconds);
  restart.backoff_max_seconds = r.value("backoff_max_seconds", restart.backoff_max_seconds);
  restart.backoff_jitter = r.value("backoff_jitter", restart.backoff_jitter);
  restart.reset_after_seconds = r.value("reset_after_seconds", restart.reset_after_seconds);
  return restart;
}

}  // namespace

Keys::Keys(const std::string& prefix, const std::string& slice) : root(absl::StrCat(prefix, "/slices/", slice, "/")) {}

std::optional<int> Keys::MemberOf(const std::string& key) const {
  absl::string_view rest = key;
  if (!absl::ConsumePrefix(&rest, members())) return std::nullopt;
  int worker = 0;
  if (!absl::SimpleAtoi(rest, &worker) || worker < 0) return std::nullopt;
  return worker;
}

std::optional<std::pair<std::string, std::string>> Keys::GangKeyOf(const std::string& key) const {
  absl::string_view rest = key;
  if (!absl::ConsumePrefix(&rest, gangs())) return std::nullopt;
  const std::size_t slash = rest.find('/');
  if (slash == absl::string_view::npos || slash == 0) return std::nullopt;
  return std::make_pair(std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1)));
}

std::string EncodeMember(const MemberRecord& member) {
  return json{{"worker", member.worker},
              {"host", member.host},
              {"version", member.version},
              {"pid", member.pid},
              {"joined_unix_ms", member.joined_unix_ms},
              {"state_dir", member.state_dir},
              {"num_workers", member.num_workers}}
      .dump();
}

absl::StatusOr<MemberRecord> DecodeMember(const std::string& text) {
  return Decode<MemberRecord>(text, "member", [](const json& j) {
    MemberRecord member;
    member.worker = j.at("worker").get<int>();
    member.host = j.value("host", "");
    member.version = j.value("version", "");
    member.pid = j.value("pid", std::int64_t{0});
    member.joined_unix_ms = j.value("joined_unix_ms", std::int64_t{0});
    member.state_dir = j.value("state_dir", "");
    member.num_workers = j.value("num_workers", 0);
    return member;
  });
}

std::string EncodeGeneration(const GenerationRecord& record) {
  const GangCommit& commit = record.commit;
  json j = {{"generation", commit.generation},
            {"phase", GangPhaseName(commit.phase)},
            {"reason", commit.reason},
            {"restarts", commit.restarts},
            {"restarts_by_reason", commit.restarts_by_reason},
            {"counted", record.counted},
            {"restart", RestartJson(record.restart)},
            {"started_unix_ms", record.started_unix_ms},
            {"stopping_unix_ms", record.stopping_unix_ms},
            {"slice_reset_started", record.slice_reset_started},
            {"person_generation", record.person_generation}};
  if (commit.step) j["step"] = *commit.step;
  if (commit.reset_class) j["reset_class"] = FailureClassName(*commit.reset_class);
  if (record.cause) j["cause"] = CauseJson(*record.cause);
  if (record.last_cause) j["last_cause"] = CauseJson(*record.last_cause);
  return j.dump();
}

absl::StatusOr<GenerationRecord> DecodeGeneration(const std::string& text) {
  return Decode<GenerationRecord>(text, "generation", [](const json& j) {
    GenerationRecord record;
    GangCommit& commit = record.commit;
    commit.generation = j.at("generation").get<std::int64_t>();
    const std::optional<GangPhase> phase = ParseGangPhase(j.at("phase").get<std::string>());
    if (!phase) throw json::other_error::create(501, "unknown phase " + j.at("phase").dump(), &j);
    commit.phase = *phase;
    commit.reason = j.value("reason", "");
    commit.restarts = j.value("restarts", 0);
    commit.restarts_by_reason = j.value("restarts_by_reason", std::map<std::string, std::int64_t>{});
    if (j.contains("step")) commit.step = j.at("step").get<std::int64_t>();
    if (j.contains("reset_class")) commit.reset_class = ParseFailureClass(j.at("reset_class").get<std::string>());
    record.counted = j.value("counted", false);
    if (j.contains("restart")) record.restart = RestartFromJson(j.at("restart"));
    record.started_unix_ms = j.value("started_unix_ms", std::int64_t{0});
    record.stopping_unix_ms = j.value("stopping_unix_ms", std::int64_t{0});
    record.slice_reset_started = j.value("slice_reset_started", false);
    record.person_generation = j.value("person_generation", std::int64_t{0});
    if (j.contains("cause")) record.cause = CauseFrom(j.at("cause"));
    if (j.contains("last_cause")) record.last_cause = CauseFrom(j.at("last_cause"));
    return record;
  });
}

std::string EncodeReport(const GangReport& report) {
  return json{{"worker", report.worker}, {"generation", report.generation}, {"steps", report.steps}}.dump();
}

absl::StatusOr<GangReport> DecodeReport(const std::string& text) {
  return Decode<GangReport>(text, "report", [](const json& j) {
    GangReport report;
    report.worker = j.at("worker").get<int>();
    report.generation = j.at("generation").get<std::int64_t>();
    report.steps = j.value("steps", std::vector<std::int64_t>{});
    return report;
  });
}

std::string EncodeStatus(const WorkerJobStatus& status) {
  json j = {{"worker", status.worker},   {"state", status.state},           {"reason", status.reason},
            {"attempt", status.attempt}, {"pid", status.pid},               {"generation", status.generation},
            {"state_since_unix_ms", status.state_since_unix_ms}};
  if (status.last_step) j["last_step"] = *status.last_step;
  return j.dump();
}

absl::StatusOr<WorkerJobStatus> DecodeStatus(const std::string& text) {
  return Decode<WorkerJobStatus>(text, "status", [](const json& j) {
    WorkerJobStatus status;
    status.worker = j.at("worker").get<int>();
    status.state = j.value("state", "");
    status.reason = j.value("reason", "");
    status.attempt = j.value("attempt", 0);
    status.pid = j.value("pid", 0);
    status.generation = j.value("generation", std::int64_t{0});
    status.state_since_unix_ms = j.value("state_since_unix_ms", std::int64_t{0});
    if (j.contains("last_step")) status.last_step = j.at("last_step").get<std::int64_t>();
    return status;
  });
}

std::string EncodeEvents(const WorkerEvents& events) {
  json list = json::array();
  for (const GangEvent& e : events.events) {
    json j = {{"sequence", e.sequence}, {"time_unix_ms", e.time_unix_ms}, {"from", e.from},
              {"to", e.to},             {"reason", e.reason},             {"attempt", e.attempt}};
    if (e.step) j["step"] = *e.step;
    if (e.exit) {
      j["exit"] = {{"code", e.exit->code},
                   {"signal", e.exit->signal},
                   {"core_dumped", e.exit->core_dumped},
                   {"spawn_error", e.exit->spawn_error}};
    }
    list.push_back(std::move(j));
  }
  return json{{"worker", events.worker}, {"events", std::move(list)}}.dump();
}

absl::StatusOr<WorkerEvents> DecodeEvents(const std::string& text) {
  return Decode<WorkerEvents>(text, "events", [](const json& j) {
    WorkerEvents events;
    events.worker = j.at("worker").get<int>();
    for (const json& e : j.at("events")) {
      if (events.events.size() == WorkerEvents::kMaxWorkerEvents) break;
      GangEvent event;
      event.sequence = e.at("sequence").get<std::int64_t>();
      event.time_unix_ms = e.at("time_unix_ms").get<std::int64_t>();
      event.from = e.value("from", "");
      event.to = e.value("to", "");
      event.reason = e.value("reason", "");
      event.attempt = e.value("attempt", 0);
      if (e.contains("step")) event.step = e.at("step").get<std::int64_t>();
      if (e.contains("exit")) {
        const json& exit = e.at("exit");
        event.exit.emplace();
        event.exit->code = exit.value("code", -1);
        event.exit->signal = exit.value("signal", 0);
        event.exit->core_dumped = exit.value("core_dumped", false);
        event.exit->spawn_error = exit.value("spawn_error", "");
      }
      events.events.push_back(std::move(event));
    }
    return events;
  });
}

std::string EncodePendingProposals(const std::vector<PendingProposal>& pending) {
  json list = json::array();
  for (const PendingProposal& p : pending) {
    const GangProposal& proposal = p.proposal;
    if (proposal.intent != GangProposal::Intent::kStop && proposal.intent != GangProposal::Intent::kLeave) continue;
    list.push_back({{"job", p.job},
                    {"intent", proposal.intent == GangProposal::Intent::kStop ? "stop" : "leave"},
                    {"base_generation", proposal.base_generation},
                    {"worker", proposal.worker},
                    {"reason", proposal.reason},
                    {"restart", RestartJson(proposal.restart)}});
  }
  return list.dump(2);
}

absl::StatusOr<std::vector<PendingProposal>> DecodePendingProposals(const std::string& text) {
  return Decode<std::vector<PendingProposal>>(text, "pending proposals", [](const json& list) {
    std::vector<PendingProposal> pending;
    for (const json& j : list) {
      PendingProposal p;
      p.job = j.at("job").get<std::string>();
      const std::string intent = j.at("intent").get<std::string>();
      if (intent != "stop" && intent != "leave") {
        throw json::other_error::create(501, "unknown intent " + j.at("intent").dump(), &j);
      }
      p.proposal.intent = intent == "stop" ? GangProposal::Intent::kStop : GangProposal::Intent::kLeave;
      p.proposal.base_generation = j.at("base_generation").get<std::int64_t>();
      p.proposal.worker = j.at("worker").get<int>();
      p.proposal.reason = j.value("reason", "");
      if (j.contains("restart")) p.proposal.restart = RestartFromJson(j.at("restart"));
      pending.push_back(std::move(p));
    }
    return pending;
  });
}

std::string EncodeAttempt(const AttemptRecord& r) {
  return json{{"worker", r.worker},   {"host", r.host},       {"state_dir", r.state_dir},
              {"pid", r.pid},         {"attempt", r.attempt}, {"generation", r.generation},
              {"started_unix_ms", r.started_unix_ms}}
      .dump();
}

absl::StatusOr<AttemptRecord> DecodeAttempt(const std::string& text) {
  return Decode<AttemptRecord>(text, "attempt", [](const json& j) {
    AttemptRecord r;
    r.worker = j.at("worker").get<int>();
    r.host = j.value("host", "");
    r.state_dir = j.value("state_dir", "");
    r.pid = j.value("pid", std::int64_t{0});
    r.attempt = j.value("attempt", 0);
    r.generation = j.value("generation", std::int64_t{0});
    r.started_unix_ms = j.value("started_unix_ms", std::int64_t{0});
    return r;
  });
}

}  // namespace tpud::slice
