// The state database's connection settings, integrity check, schema and
// migrations (internal to daemon/state; used by sqlite_state_store.cc).
#pragma once

#include "absl/status/status.h"
#include "daemon/state/sqlite_db.h"

namespace tpud::sqlite {

// Makes a freshly opened `db` ready for the state store:
//  1. journal_mode=WAL, synchronous=NORMAL (commits are not fsynced; see
//     StateStore::Sync and the comment in sqlite_schema.cc);
//  2. PRAGMA quick_check;
//  3. in one write transaction: checks PRAGMA application_id (0 or "tpud") and
//     user_version (at most kStateSchemaVersion), runs the missing migrations
//     and advances user_version; all of it or, on error, none of it.
// Errors name the file: DataLoss (not a database, corrupt), FailedPrecondition
// (WAL impossible, another application's database, a newer schema), and the
// codes of sqlite_db.h. Never deletes or truncates anything.
absl::Status PrepareStateSchema(Db& db);

}  // namespace tpud::sqlite
