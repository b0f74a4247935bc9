// A small C++ face on the SQLite C API: a connection and its prepared
// statements, with SQLite result codes turned into absl::Status that name the
// database file. sqlite_db.cc is the only file in tpud that includes
// <sqlite3.h>; the state store's SQL lives in sqlite_state_store.cc.
//
// Error mapping (result codes: https://www.sqlite.org/rescode.html):
//   SQLITE_NOTADB, SQLITE_CORRUPT          -> DataLoss
//   SQLITE_PERM, SQLITE_READONLY, SQLITE_AUTH, SQLITE_CANTOPEN (EACCES)
//                                          -> PermissionDenied
//   SQLITE_BUSY, SQLITE_LOCKED             -> Unavailable
//   SQLITE_FULL                            -> ResourceExhausted
//   SQLITE_CONSTRAINT, SQLITE_MISMATCH, SQLITE_RANGE -> InvalidArgument
//   anything else                          -> Internal
// Messages read `state store "/var/lib/tpud/tpud.db": <what>: <sqlite message>`.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tpud::sqlite {

class Db;

// One prepared statement. Bind parameters (1-based), Step through the rows,
// read columns (0-based), then Reset before the next use.
// Must be destroyed before its Db.
// Thread-safety: not thread-safe; same rule as its Db.
class Statement {
 public:
  Statement(sqlite3_stmt* stmt, const Db* db) : stmt_(stmt), db_(db) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Bind errors (an index out of range) are reported by the next Step().
  Statement& Bind(int index, std::int64_t value);
  Statement& Bind(int index, const std::string& value);
  Statement& BindNull(int index);

  // Runs to the next row. True: a row is ready to read; false: done.
  absl::StatusOr<bool> Step();
  // Steps until done; for statements that return no rows.
  absl::Status Run();

  bool IsNull(int column) const;
  std::int64_t Int(int column) const;
  std::string Text(int column) const;  // "" for NULL.

  // Makes the statement ready to run again with fresh bindings.
  void Reset();

 private:
  sqlite3_stmt* stmt_;
  const Db* db_;
  int bind_error_ = 0;  // First failed bind's result code; 0 when none.
};

// One open connection to a database file.
// Thread-safety: opened in SQLite's multi-thread mode (SQLITE_OPEN_NOMUTEX):
// a Db and its Statements must be used by one thread at a time.
class Db {
 public:
  // Opens, creating when missing, the file at `path` for reading and writing,
  // waiting up to `busy_timeout` for locks held by other connections.
  // PermissionDenied when it can only be opened read-only.
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::filesystem::path& path,
                                                  std::chrono::milliseconds busy_timeout);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more ';'-separated statements that return no rows needed.
  absl::Status Exec(const std::string& sql);
  // Compiles one statement for repeated use.
  absl::StatusOr<std::unique_ptr<Statement>> Prepare(const std::string& sql);
  // Rowid of the last successful INSERT on this connection.
  std::int64_t LastInsertRowId() const;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int Changes() const;

  // A status for SQLite result code `rc` in doing `what`, with the path and
  // the connection's error message.
  absl::Status Error(int rc, const std::string& what) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  Db(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::filesystem::path path_;
};

}  // namespace tpud::sqlite
