// The only file in tpud that includes <sqlite3.h> (see sqlite_db.h).
#include "daemon/state/sqlite_db.h"

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud::sqlite {
namespace {

// The first line of a statement's SQL, shortened, to say which one failed.
std::string Excerpt(sqlite3_stmt* stmt) {
  const char* sql = sqlite3_sql(stmt);
  std::string text = sql == nullptr ? "?" : sql;
  std::size_t end = text.find_first_of("\n(");
  if (end != std::string::npos) text.resize(end);
  if (text.size() > 48) text.resize(48);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

absl::StatusCode CodeFor(int rc, int system_errno) {
  switch (rc & 0xff) {  // The primary code of an extended result code.
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CANTOPEN:
      return system_errno == EACCES ? absl::StatusCode::kPermissionDenied
                                    : absl::StatusCode::kInternal;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, const std::string& value) {
  int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                             SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_error_ != 0) return db_->Error(bind_error_, absl::StrCat("bind ", Excerpt(stmt_)));
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, Excerpt(stmt_));
}

absl::Status Statement::Run() {
  for (;;) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = 0;
}

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::filesystem::path& path,
                                             std::chrono::milliseconds busy_timeout) {
  sqlite3* handle = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &handle, flags, nullptr);
  // Even on failure SQLite usually returns a handle, which carries the message.
  std::unique_ptr<Db> db(new Db(handle, path));
  if (rc != SQLITE_OK) return db->Error(rc, "open");
  sqlite3_extended_result_codes(handle, 1);
  sqlite3_busy_timeout(handle, static_cast<int>(busy_timeout.count()));
  // SQLITE_OPEN_READWRITE quietly falls back to read-only for a
  // write-protected file (https://www.sqlite.org/c3ref/open.html).
  if (sqlite3_db_readonly(handle, "main") == 1) {
    return absl::PermissionDeniedError(
        absl::StrCat("state store \"", path.string(), "\": open: the file is read-only"));
  }
  return db;
}

Db::~Db() { sqlite3_close_v2(db_); }  // Accepts nullptr.

absl::Status Db::Exec(const std::string& sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);  // Error() reads the same text from the connection.
  if (rc != SQLITE_OK) return Error(rc, "exec");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Statement>> Db::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "prepare");
  return std::make_unique<Statement>(stmt, this);
}

std::int64_t Db::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int Db::Changes() const { return sqlite3_changes(db_); }

absl::Status Db::Error(int rc, const std::string& what) const {
  const char* message = db_ == nullptr ? sqlite3_errstr(rc) : sqlite3_errmsg(db_);
  int system_errno = db_ == nullptr ? 0 : sqlite3_system_errno(db_);
  std::string os_error;  // What the OS said, when SQLite's message is generic.
  int primary = rc & 0xff;
  if (system_errno != 0 && (primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR)) {
    os_error = absl::StrCat(" (", std::strerror(system_errno), ")");
  }
  std::string text =
      absl::StrCat("state store \"", path_.string(), "\": ", what, ": ", message, os_error);
  return absl::Status(CodeFor(rc, system_errno), text);
}

}  // namespace tpud::sqlite
