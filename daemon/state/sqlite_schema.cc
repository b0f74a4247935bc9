// Settings, integrity check, schema and migrations of the state database.
//
// Durability (https://www.sqlite.org/wal.html,
// https://www.sqlite.org/pragma.html#pragma_synchronous): in WAL mode
// synchronous=NORMAL writes each commit to the write-ahead log without an
// fsync: a commit survives a crash or SIGKILL of tpud (the page cache outlives
// the process) and the database is never corrupted, but a power loss or VM
// reset may roll back the commits since the last WAL sync. Commits happen on
// every job transition (several per restart, hundreds per second at 1000
// jobs), where an fsync each (0.3-4 ms) would sit on the restart path; a power
// loss also ends every attempt, so a rolled-back transition only makes tpud
// treat the attempt as lost (it restarts from the checkpoint either way). What
// a person asked for must survive a power loss too: StateStore::Sync (a WAL
// checkpoint, which syncs the WAL first) runs after every such request.
#include "daemon/state/sqlite_schema.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/state/state_store.h"

namespace tpud::sqlite {
namespace {

constexpr std::int64_t kApplicationId = 0x74707564;  // "tpud", in PRAGMA application_id.

// kMigrations[i] brings the schema from version i to i + 1. Append only: a
// released migration never changes. Tables are STRICT (SQLite >= 3.37).
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  name TEXT PRIMARY KEY NOT NULL,
  spec_yaml TEXT NOT NULL,
  origin TEXT NOT NULL,
  desired_running INTEGER NOT NULL,
  state TEXT NOT NULL,
  state_reason TEXT NOT NULL,
  state_since_unix_ms INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  restarts INTEGER NOT NULL,
  attempts_total INTEGER NOT NULL,
  restarts_by_reason TEXT NOT NULL,  -- JSON object: {"exit_code": 3, ...}
  exit_code INTEGER,                 -- exit_*: the last exit; all NULL when none.
  exit_signal INTEGER,
  exit_core_dumped INTEGER,
  exit_spawn_error TEXT,
  pid INTEGER NOT NULL,
  attempt_dir TEXT NOT NULL
) STRICT;
CREATE TABLE incidents (
  id INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused.
  job TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  started_unix_ms INTEGER NOT NULL,
  ended_unix_ms INTEGER NOT NULL,        -- 0 while open.
  failure_class TEXT NOT NULL,
  action TEXT NOT NULL,
  hint TEXT NOT NULL,
  matched_line TEXT NOT NULL,
  exit_description TEXT NOT NULL,
  step_reached INTEGER NOT NULL,
  checkpoint_step INTEGER NOT NULL,
  reset_backend TEXT NOT NULL,
  reset_duration_ms INTEGER NOT NULL,
  reset_result TEXT NOT NULL,
  notes TEXT NOT NULL
) STRICT;
CREATE INDEX incidents_by_job ON incidents (job, id);
CREATE INDEX incidents_open ON incidents (id) WHERE ended_unix_ms = 0;
)sql",
    // 2: where an active job was in its state, and the event history.
    R"sql(
ALTER TABLE jobs ADD COLUMN attempt_started_unix_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN backoff_until_unix_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stop_rung INTEGER NOT NULL DEFAULT -1;
ALTER TABLE jobs ADD COLUMN stop_next_rung_unix_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stop_intent TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN reset_pending TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN log_dropped_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN run_as_user TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN run_as_group TEXT NOT NULL DEFAULT '';
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job TEXT NOT NULL,
  time_unix_ms INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  exit_code INTEGER,                     -- exit_*: all NULL when no exit caused it.
  exit_signal INTEGER,
  exit_core_dumped INTEGER,
  exit_spawn_error TEXT,
  checkpoint_path TEXT NOT NULL,
  checkpoint_step INTEGER NOT NULL
) STRICT;
)sql",
    // 3: gang jobs (a multi-host slice's generations).
    R"sql(
ALTER TABLE jobs ADD COLUMN gang_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN gang_failed_generation INTEGER NOT NULL DEFAULT 0;
)sql",
};
static_assert(std::size(kMigrations) == kStateSchemaVersion);

// Runs a statement that returns one row and reads its first column.
absl::StatusOr<std::int64_t> QueryInt(Db& db, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<Statement>> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::InternalError(
        absl::StrCat("state store \"", db.path().string(), "\": ", sql, ": no row"));
  }
  return (*stmt)->Int(0);
}

absl::StatusOr<std::string> QueryText(Db& db, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<Statement>> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = (*stmt)->Step();
  if (!row.ok()) return row.status();
  return *row ? (*stmt)->Text(0) : std::string();
}

absl::Status Configure(Db& db) {
  // Exclusive locking before anything reads the file: this connection then
  // holds the database for its whole life (a second tpud cannot open it), and
  // in WAL mode keeps the WAL index in heap memory instead of a mapped -shm
  // file (https://www.sqlite.org/pragma.html#pragma_locking_mode,
  // https://www.sqlite.org/wal.html#noshm): a disk that turns unwritable can
  // then fail writes, but never fault a mapped page (SIGBUS).
  absl::StatusOr<std::string> locking = QueryText(db, "PRAGMA locking_mode = EXCLUSIVE");
  if (!locking.ok()) return locking.status();
  // journal_mode answers with the mode now in effect; it stays "delete" (or
  // "memory") where WAL is impossible, e.g. some network filesystems.
  absl::StatusOr<std::string> mode = QueryText(db, "PRAGMA journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat("state store \"", db.path().string(),
                                                      "\": cannot use WAL journal mode (got ",
                                                      *mode, ")"));
  }
  if (absl::Status s = db.Exec("PRAGMA synchronous = NORMAL"); !s.ok()) return s;
  absl::StatusOr<std::string> check = QueryText(db, "PRAGMA quick_check");
  if (!check.ok()) return check.status();
  if (*check != "ok") {
    std::replace(check->begin(), check->end(), '\n', ' ');
    return absl::DataLossError(absl::StrCat("state store \"", db.path().string(),
                                            "\": integrity check failed: ", *check));
  }
  return absl::OkStatus();
}

// Checks whose database this is and runs the migrations it lacks. Requires an
// open write transaction, so two processes opening the file at once cannot
// both migrate it.
absl::Status MigrateInTransaction(Db& db) {
  absl::StatusOr<std::int64_t> version = QueryInt(db, "PRAGMA user_version");
  if (!version.ok()) return version.status();
  absl::StatusOr<std::int64_t> app = QueryInt(db, "PRAGMA application_id");
  if (!app.ok()) return app.status();
  std::string where = absl::StrCat("state store \"", db.path().string(), "\": ");
  if (*app != 0 && *app != kApplicationId) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "not a tpud database (application_id ", *app, ")"));
  }
  if (*version > kStateSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "schema version ", *version, " was written by a newer tpud; ",
                     "this one knows versions up to ", kStateSchemaVersion));
  }
  for (std::int64_t v = *version; v < kStateSchemaVersion; ++v) {
    std::string sql = absl::StrCat(kMigrations[v], "PRAGMA user_version = ", v + 1,
                                   "; PRAGMA application_id = ", kApplicationId, ";");
    if (absl::Status s = db.Exec(sql); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), " (migrating to version ", v + 1,
                                                 ")"));
    }
  }
  return absl::OkStatus();
}

// Brings the schema up to date in one transaction: all of it or nothing.
absl::Status Migrate(Db& db) {
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Status status = MigrateInTransaction(db);
  if (status.ok()) status = db.Exec("COMMIT");
  if (!status.ok()) db.Exec("ROLLBACK").IgnoreError();  // Harmless when nothing is open.
  return status;
}

}  // namespace

absl::Status PrepareStateSchema(Db& db) {
  if (absl::Status s = Configure(db); !s.ok()) return s;
  return Migrate(db);
}

}  // namespace tpud::sqlite
