// StateStore on SQLite: the SQL of each call. The schema, its migrations and
// the durability settings are in sqlite_schema.cc.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/state/sqlite_db.h"
#include "daemon/state/sqlite_schema.h"
#include "daemon/state/state_store.h"

namespace tpud {
namespace {

using sqlite::Db;
using sqlite::Statement;

// Only another process holding the file makes SQLite wait, and with
// exclusive locking that is a second tpud on the same state_dir: no need to
// wait long for it.
constexpr std::chrono::milliseconds kBusyTimeout{1000};
constexpr char kJobColumns[] =
    "name, spec_yaml, origin, desired_running, state, state_reason, state_since_unix_ms, "
    "attempt, restarts, attempts_total, restarts_by_reason, exit_code, exit_signal, "
    "exit_core_dumped, exit_spawn_error, pid, attempt_dir, attempt_started_unix_ms, "
    "backoff_until_unix_ms, stop_rung, stop_next_rung_unix_ms, stop_intent, reset_pending, "
    "log_dropped_bytes, run_as_user, run_as_group, gang_generation, gang_failed_generation";
constexpr char kEventFields[] =
    "job, time_unix_ms, from_state, to_state, reason, attempt, exit_code, exit_signal, "
    "exit_core_dumped, exit_spawn_error, checkpoint_path, checkpoint_step";
constexpr char kEventValues[] = "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12";
// Every column but the id, in the order of ReadIncident's columns 1...
constexpr char kIncidentFields[] =
    "job, attempt, started_unix_ms, ended_unix_ms, failure_class, action, hint, "
    "matched_line, exit_description, step_reached, checkpoint_step, reset_backend, "
    "reset_duration_ms, reset_result, notes";
constexpr char kJobValues[] =
    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
    "?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28";
constexpr char kIncidentValues[] =
    "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16";

// Resets a statement when leaving the scope that uses it, so no read
// transaction stays open and the next use starts clean.
class ScopedReset {
 public:
  explicit ScopedReset(Statement& stmt) : stmt_(stmt) { stmt_.Reset(); }
  ~ScopedReset() { stmt_.Reset(); }
  ScopedReset(const ScopedReset&) = delete;
  ScopedReset& operator=(const ScopedReset&) = delete;

 private:
  Statement& stmt_;
};

// Binds exit columns `first`..`first + 3` (all NULL without an exit).
void BindExit(Statement& stmt, int first, const std::optional<ExitStatus>& exit) {
  if (exit.has_value()) {
    stmt.Bind(first, std::int64_t{exit->code}).Bind(first + 1, std::int64_t{exit->signal});
    stmt.Bind(first + 2, std::int64_t{exit->core_dumped}).Bind(first + 3, exit->spawn_error);
  } else {
    stmt.BindNull(first).BindNull(first + 1).BindNull(first + 2).BindNull(first + 3);
  }
}

std::optional<ExitStatus> ReadExit(const Statement& row, int first) {
  if (row.IsNull(first)) return std::nullopt;
  return ExitStatus{static_cast<int>(row.Int(first)), static_cast<int>(row.Int(first + 1)),
                    row.Int(first + 2) != 0, row.Text(first + 3)};
}

void BindJob(Statement& stmt, const JobRecord& job) {
  nlohmann::json reasons(job.restarts_by_reason);
  // `replace`: a key that is not UTF-8 gets U+FFFD instead of throwing.
  std::string reasons_json = reasons.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  stmt.Bind(1, job.name).Bind(2, job.spec_yaml).Bind(3, job.origin);
  stmt.Bind(4, std::int64_t{job.desired_running}).Bind(5, job.state).Bind(6, job.state_reason);
  stmt.Bind(7, job.state_since_unix_ms).Bind(8, std::int64_t{job.attempt});
  stmt.Bind(9, std::int64_t{job.restarts}).Bind(10, job.attempts_total);
  stmt.Bind(11, reasons_json);
  BindExit(stmt, 12, job.last_exit);
  stmt.Bind(16, std::int64_t{job.pid}).Bind(17, job.attempt_dir);
  stmt.Bind(18, job.attempt_started_unix_ms).Bind(19, job.backoff_until_unix_ms);
  stmt.Bind(20, std::int64_t{job.stop_rung}).Bind(21, job.stop_next_rung_unix_ms);
  stmt.Bind(22, job.stop_intent).Bind(23, job.reset_pending).Bind(24, job.log_dropped_bytes);
  stmt.Bind(25, job.run_as_user).Bind(26, job.run_as_group);
  stmt.Bind(27, job.gang_generation).Bind(28, job.gang_failed_generation);
}

void BindEvent(Statement& stmt, const EventRecord& event) {
  stmt.Bind(1, event.job).Bind(2, event.time_unix_ms).Bind(3, event.from_state).Bind(4, event.to_state);
  stmt.Bind(5, event.reason).Bind(6, std::int64_t{event.attempt});
  BindExit(stmt, 7, event.exit);
  stmt.Bind(11, event.checkpoint_path).Bind(12, event.checkpoint_step);
}

EventRecord ReadEvent(const Statement& row) {
  EventRecord event;
  event.id = row.Int(0);
  event.job = row.Text(1);
  event.time_unix_ms = row.Int(2);
  event.from_state = row.Text(3);
  event.to_state = row.Text(4);
  event.reason = row.Text(5);
  event.attempt = static_cast<int>(row.Int(6));
  event.exit = ReadExit(row, 7);
  event.checkpoint_path = row.Text(11);
  event.checkpoint_step = row.Int(12);
  return event;
}

// Reads a row of kJobColumns. DataLoss when restarts_by_reason is not a JSON
// object (entries that are not integers are skipped).
absl::StatusOr<JobRecord> ReadJob(const Statement& row, const Db& db) {
  JobRecord job;
  job.name = row.Text(0);
  job.spec_yaml = row.Text(1);
  job.origin = row.Text(2);
  job.desired_running = row.Int(3) != 0;
  job.state = row.Text(4);
  job.state_reason = row.Text(5);
  job.state_since_unix_ms = row.Int(6);
  job.attempt = static_cast<int>(row.Int(7));
  job.restarts = static_cast<int>(row.Int(8));
  job.attempts_total = row.Int(9);
  nlohmann::json reasons = nlohmann::json::parse(row.Text(10), nullptr, /*allow_exceptions=*/false);
  if (!reasons.is_object()) {
    return absl::DataLossError(absl::StrCat("state store \"", db.path().string(), "\": job \"",
                                            job.name,
                                            "\": restarts_by_reason is not a JSON object"));
  }
  for (const auto& [reason, count] : reasons.items()) {
    if (count.is_number_integer()) job.restarts_by_reason[reason] = count.get<std::int64_t>();
  }
  job.last_exit = ReadExit(row, 11);
  job.pid = static_cast<int>(row.Int(15));
  job.attempt_dir = row.Text(16);
  job.attempt_started_unix_ms = row.Int(17);
  job.backoff_until_unix_ms = row.Int(18);
  job.stop_rung = static_cast<int>(row.Int(19));
  job.stop_next_rung_unix_ms = row.Int(20);
  job.stop_intent = row.Text(21);
  job.reset_pending = row.Text(22);
  job.log_dropped_bytes = row.Int(23);
  job.run_as_user = row.Text(24);
  job.run_as_group = row.Text(25);
  job.gang_generation = row.Int(26);
  job.gang_failed_generation = row.Int(27);
  return job;
}

// Binds ?2.. ?16 (every column but the id, ?1).
void BindIncidentFields(Statement& stmt, const IncidentRecord& in) {
  stmt.Bind(2, in.job).Bind(3, std::int64_t{in.attempt}).Bind(4, in.started_unix_ms);
  stmt.Bind(5, in.ended_unix_ms).Bind(6, in.failure_class).Bind(7, in.action).Bind(8, in.hint);
  stmt.Bind(9, in.matched_line).Bind(10, in.exit_description).Bind(11, in.step_reached);
  stmt.Bind(12, in.checkpoint_step).Bind(13, in.reset_backend).Bind(14, in.reset_duration_ms);
  stmt.Bind(15, in.reset_result).Bind(16, in.notes);
}

IncidentRecord ReadIncident(const Statement& row) {
  IncidentRecord in;
  in.id = row.Int(0);
  in.job = row.Text(1);
  in.attempt = static_cast<int>(row.Int(2));
  in.started_unix_ms = row.Int(3);
  in.ended_unix_ms = row.Int(4);
  in.failure_class = row.Text(5);
  in.action = row.Text(6);
  in.hint = row.Text(7);
  in.matched_line = row.Text(8);
  in.exit_description = row.Text(9);
  in.step_reached = row.Int(10);
  in.checkpoint_step = row.Int(11);
  in.reset_backend = row.Text(12);
  in.reset_duration_ms = row.Int(13);
  in.reset_result = row.Text(14);
  in.notes = row.Text(15);
  return in;
}

absl::StatusOr<std::vector<IncidentRecord>> ReadIncidents(Statement& stmt) {
  std::vector<IncidentRecord> incidents;
  for (;;) {
    absl::StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) return incidents;
    incidents.push_back(ReadIncident(stmt));
  }
}

class SqliteStateStore final : public StateStore {
 public:
  explicit SqliteStateStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}

  // Compiles every statement the calls use.
  absl::Status Prepare() {
    std::string select_incidents = absl::StrCat("SELECT id, ", kIncidentFields, " FROM incidents");
    const std::pair<std::unique_ptr<Statement>*, std::string> all[] = {
        {&begin_, "BEGIN IMMEDIATE"},
        {&commit_, "COMMIT"},
        {&rollback_, "ROLLBACK"},
        {&put_job_, absl::StrCat("INSERT OR REPLACE INTO jobs (", kJobColumns, ") VALUES (",
                                 kJobValues, ")")},
        {&delete_job_, "DELETE FROM jobs WHERE name = ?1"},
        {&delete_incidents_, "DELETE FROM incidents WHERE job = ?1"},
        {&delete_events_, "DELETE FROM events WHERE job = ?1"},
        {&load_jobs_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY name")},
        {&insert_incident_, absl::StrCat("INSERT INTO incidents (", kIncidentFields,
                                         ") VALUES (", kIncidentValues, ")")},
        {&update_incident_, absl::StrCat("UPDATE incidents SET (", kIncidentFields,
                                         ") = (", kIncidentValues, ") WHERE id = ?1")},
        {&list_incidents_, absl::StrCat("SELECT * FROM (", select_incidents,
                                        " WHERE ?1 = '' OR job = ?1 ORDER BY id DESC LIMIT ?2)"
                                        " ORDER BY id")},
        {&open_incidents_, absl::StrCat(select_incidents, " WHERE ended_unix_ms = 0 ORDER BY id")},
        // LIMIT -1 OFFSET n: every row after the newest n (https://www.sqlite.org/lang_select.html).
        {&prune_incidents_, absl::StrCat("DELETE FROM incidents WHERE id IN (SELECT id FROM incidents "
                                         "WHERE job = ?1 ORDER BY id DESC LIMIT -1 OFFSET ",
                                         kIncidentsKeptPerJob, ")")},
        {&insert_event_, absl::StrCat("INSERT INTO events (", kEventFields, ") VALUES (", kEventValues, ")")},
        {&prune_events_, absl::StrCat("DELETE FROM events WHERE id <= ?1 - ", kEventsKept)},
        {&list_events_, absl::StrCat("SELECT * FROM (SELECT id, ", kEventFields,
                                     " FROM events ORDER BY id DESC LIMIT ?1) ORDER BY id")},
    };
    for (const auto& [stmt, sql] : all) {
      absl::StatusOr<std::unique_ptr<Statement>> prepared = db_->Prepare(sql);
      if (!prepared.ok()) return prepared.status();
      *stmt = *std::move(prepared);
    }
    return absl::OkStatus();
  }

  absl::Status PutJob(const JobRecord& job) override {
    if (absl::Status s = CheckJobRecord(job); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    return InTransaction([&] {
      ScopedReset reset(*put_job_);
      BindJob(*put_job_, job);
      return put_job_->Run();
    });
  }

  // PASSIVE never waits for readers; the WAL is fsynced before any copying
  // (https://www.sqlite.org/wal.html#ckpt), which is what makes it durable.
  absl::Status Sync() override {
    absl::MutexLock lock(&mu_);
    return db_->Exec("PRAGMA wal_checkpoint(PASSIVE)");
  }

  absl::Status DeleteJob(const std::string& name, bool with_history) override {
    absl::MutexLock lock(&mu_);
    return InTransaction([&] {
      for (Statement* stmt : {delete_job_.get(), delete_incidents_.get(), delete_events_.get()}) {
        if (!with_history && stmt != delete_job_.get()) break;
        ScopedReset reset(*stmt);
        if (absl::Status s = stmt->Bind(1, name).Run(); !s.ok()) return s;
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<JobRecord>> LoadJobs() override {
    absl::MutexLock lock(&mu_);
    ScopedReset reset(*load_jobs_);
    std::vector<JobRecord> jobs;
    for (;;) {
      absl::StatusOr<bool> row = load_jobs_->Step();
      if (!row.ok()) return row.status();
      if (!*row) return jobs;
      absl::StatusOr<JobRecord> job = ReadJob(*load_jobs_, *db_);
      if (!job.ok()) return job.status();
      jobs.push_back(*std::move(job));
    }
  }

  absl::StatusOr<std::int64_t> OpenIncident(const IncidentRecord& incident) override {
    if (absl::Status s = CheckIncidentRecord(incident); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    std::int64_t id = 0;
    absl::Status status = InTransaction([&] {
      ScopedReset reset(*insert_incident_);
      BindIncidentFields(*insert_incident_, incident);
      absl::Status inserted = insert_incident_->Run();
      id = db_->LastInsertRowId();
      if (!inserted.ok()) return inserted;
      // Ids grow per store, not per job: delete by count, not by id range.
      return PruneIncidents(incident.job);
    });
    if (!status.ok()) return status;
    return id;
  }

  absl::Status UpdateIncident(const IncidentRecord& incident) override {
    if (absl::Status s = CheckIncidentRecord(incident); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    return InTransaction([&] {
      ScopedReset reset(*update_incident_);
      update_incident_->Bind(1, incident.id);
      BindIncidentFields(*update_incident_, incident);
      if (absl::Status s = update_incident_->Run(); !s.ok()) return s;
      if (db_->Changes() == 0) {
        return absl::NotFoundError(absl::StrCat("incident ", incident.id, ": no such incident"));
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<IncidentRecord>> ListIncidents(const std::string& job,
                                                            int limit) override {
    absl::MutexLock lock(&mu_);
    ScopedReset reset(*list_incidents_);
    list_incidents_->Bind(1, job).Bind(2, std::int64_t{limit > 0 ? limit : -1});  // -1: no limit.
    return ReadIncidents(*list_incidents_);
  }

  absl::StatusOr<std::vector<IncidentRecord>> OpenIncidents() override {
    absl::MutexLock lock(&mu_);
    ScopedReset reset(*open_incidents_);
    return ReadIncidents(*open_incidents_);
  }

  absl::StatusOr<std::int64_t> AppendEvent(const EventRecord& event) override {
    if (absl::Status s = CheckEventRecord(event); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    std::int64_t id = 0;
    absl::Status status = InTransaction([&] {
      ScopedReset reset(*insert_event_);
      BindEvent(*insert_event_, event);
      if (absl::Status s = insert_event_->Run(); !s.ok()) return s;
      id = db_->LastInsertRowId();
      if (id % 100 != 0) return absl::OkStatus();  // Prune now and then: the bound is loose by 100.
      ScopedReset prune(*prune_events_);
      return prune_events_->Bind(1, id).Run();
    });
    if (!status.ok()) return status;
    return id;
  }

  absl::StatusOr<std::vector<EventRecord>> ListEvents(int limit) override {
    absl::MutexLock lock(&mu_);
    ScopedReset reset(*list_events_);
    list_events_->Bind(1, std::int64_t{limit > 0 ? limit : -1});
    std::vector<EventRecord> events;
    for (;;) {
      absl::StatusOr<bool> row = list_events_->Step();
      if (!row.ok()) return row.status();
      if (!*row) return events;
      events.push_back(ReadEvent(*list_events_));
    }
  }

 private:
  // Deletes `job`'s incidents beyond its newest kIncidentsKeptPerJob. In a
  // transaction, under mu_ (not annotated: it runs inside InTransaction's
  // lambdas).
  absl::Status PruneIncidents(const std::string& job) {
    ScopedReset reset(*prune_incidents_);
    return prune_incidents_->Bind(1, job).Run();
  }

  // Runs `body` between BEGIN IMMEDIATE and COMMIT; rolls back when any fails.
  absl::Status InTransaction(const std::function<absl::Status()>& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status status = RunReset(*begin_);
    if (!status.ok()) return status;
    status = body();
    if (status.ok()) status = RunReset(*commit_);
    if (!status.ok()) RunReset(*rollback_).IgnoreError();  // Nothing to roll back is fine.
    return status;
  }

  static absl::Status RunReset(Statement& stmt) {
    ScopedReset reset(stmt);
    return stmt.Run();
  }

  // Held by every public method. The statements are not annotated: the
  // bodies given to InTransaction are lambdas, which the analysis checks
  // without the caller's lock.
  absl::Mutex mu_;
  std::unique_ptr<Db> db_;  // Declared first: outlives the statements below.
  std::unique_ptr<Statement> begin_, commit_, rollback_;
  std::unique_ptr<Statement> put_job_, delete_job_, load_jobs_;
  std::unique_ptr<Statement> insert_incident_, update_incident_, list_incidents_, open_incidents_;
  std::unique_ptr<Statement> prune_incidents_, delete_incidents_, delete_events_;
  std::unique_ptr<Statement> insert_event_, prune_events_, list_events_;
};

// tpud never deletes state: on DataLoss, say what the operator can do instead.
absl::Status WithAdvice(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kDataLoss) return status;
  return absl::DataLossError(absl::StrCat(status.message(), " (tpud leaves the file as it is; move "
                                          "it aside to start with an empty state)"));
}

absl::Status CreateStateDir(const std::filesystem::path& state_dir) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (!ec) return absl::OkStatus();
  return absl::Status(ec == std::errc::permission_denied ? absl::StatusCode::kPermissionDenied
                                                         : absl::StatusCode::kInternal,
                      absl::StrCat("state dir \"", state_dir.string(), "\": cannot create: ",
                                   ec.message()));
}

}  // namespace

// Only tpud's own user may read the database: submitted specs carry env values.
void RestrictToOwner(const std::filesystem::path& db_path) {
  for (const char* suffix : {"", "-wal", "-journal"}) {
    std::error_code ec;
    std::filesystem::permissions(db_path.string() + suffix, std::filesystem::perms::owner_read |
                                                                std::filesystem::perms::owner_write, ec);
  }
}

absl::StatusOr<std::unique_ptr<StateStore>> OpenSqliteStateStore(
    const std::filesystem::path& state_dir) {
  if (absl::Status s = CreateStateDir(state_dir); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Db>> db = Db::Open(state_dir / "tpud.db", kBusyTimeout);
  if (!db.ok()) return WithAdvice(db.status());
  // Before the first write: SQLite gives the -wal file the database's mode.
  RestrictToOwner(state_dir / "tpud.db");
  if (absl::Status s = sqlite::PrepareStateSchema(**db); !s.ok()) return WithAdvice(s);
  auto store = std::make_unique<SqliteStateStore>(*std::move(db));
  if (absl::Status s = store->Prepare(); !s.ok()) return s;
  return store;
}

}  // namespace tpud
