#include "daemon/state/state_store.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;  // A fresh directory, removed with everything in it.

void RequireOk(const absl::Status& status) {
  INFO(status.ToString());
  REQUIRE(status.ok());
}

template <typename T>
T RequireOk(absl::StatusOr<T> result) {
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return *std::move(result);
}

std::unique_ptr<StateStore> OpenSqlite(const fs::path& state_dir) {
  return RequireOk(OpenSqliteStateStore(state_dir));
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The two implementations the shared cases run against.
struct SqliteBackend {
  TempDir dir;
  std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
};
struct MemoryBackend {
  std::unique_ptr<StateStore> store = MakeMemoryStateStore();
};

// A record with every field away from its default.
JobRecord FullJob(const std::string& name) {
  JobRecord job;
  job.name = name;
  job.spec_yaml = "name: " + name + "\ncommand: [\"python3\", \"-c\", \"print('héllo')\"]\n";
  job.origin = "submitted:/tmp/" + name + ".yaml";
  job.desired_running = true;
  job.state = "backoff";
  job.state_reason = "exit code 3; restarting in 2.0s";
  job.state_since_unix_ms = 1'700'000'000'123;
  job.attempt = 7;
  job.restarts = 6;
  job.attempts_total = 9'000'000'000;  // Past 32 bits.
  job.restarts_by_reason = {{"exit_code", 4}, {"signal", 2}, {"preemption \"x\"", 1}};
  job.last_exit = ExitStatus{-1, 9, true, "spawn failed: \"/usr/bin/nope\": ENOENT"};
  job.pid = 424242;
  job.attempt_dir = "/var/lib/tpud/attempts/" + name + "/7";
  job.attempt_started_unix_ms = 1'700'000'000'001;  // Schema 2: where within its state.
  job.backoff_until_unix_ms = 1'700'000'002'500;
  job.stop_rung = 1;
  job.stop_next_rung_unix_ms = 1'700'000'030'000;
  job.stop_intent = "restart";
  job.reset_pending = "deadline_exceeded";
  job.log_dropped_bytes = 3304;
  job.run_as_user = "1000";
  job.run_as_group = "users";
  return job;
}

IncidentRecord FullIncident(const std::string& job, std::int64_t started_unix_ms) {
  IncidentRecord in;
  in.job = job;
  in.attempt = 3;
  in.started_unix_ms = started_unix_ms;
  in.failure_class = "preemption";
  in.action = "reset_tpu_then_restart";
  in.hint = "The TPU VM was preempted; tpud resumes from the newest checkpoint.";
  in.matched_line = "E0101 RuntimeError: TPU 'x' preempted\t(code 14) \xff\xfe";  // Not UTF-8.
  in.exit_description = "killed by SIGKILL";
  in.step_reached = 12'345;
  in.checkpoint_step = 12'000;
  in.reset_backend = "gce_api";
  in.reset_duration_ms = 93'000;
  in.reset_result = "ok";
  in.notes = "line one\nline two";
  return in;
}

TEMPLATE_TEST_CASE("StateStore: a job record round-trips every field", "[state]", SqliteBackend,
                   MemoryBackend) {
  TestType backend;
  JobRecord full = FullJob("digits");
  JobRecord bare;  // Defaults: no last exit, no restarts.
  bare.name = "bare";
  RequireOk(backend.store->PutJob(full));
  RequireOk(backend.store->PutJob(bare));

  std::vector<JobRecord> jobs = RequireOk(backend.store->LoadJobs());
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0] == bare);
  CHECK_FALSE(jobs[0].last_exit.has_value());
  CHECK(jobs[1] == full);
  REQUIRE(jobs[1].last_exit.has_value());
  CHECK(jobs[1].last_exit->signal == 9);
  CHECK(jobs[1].last_exit->core_dumped);
}

TEMPLATE_TEST_CASE("StateStore: PutJob replaces every field of the job with that name", "[state]",
                   SqliteBackend, MemoryBackend) {
  TestType backend;
  RequireOk(backend.store->PutJob(FullJob("digits")));
  JobRecord stopped = FullJob("digits");
  stopped.desired_running = false;
  stopped.state = "stopped";
  stopped.last_exit.reset();
  stopped.restarts_by_reason = {{"signal", 3}};
  stopped.pid = 0;
  RequireOk(backend.store->PutJob(stopped));

  std::vector<JobRecord> jobs = RequireOk(backend.store->LoadJobs());
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0] == stopped);
}

TEMPLATE_TEST_CASE("StateStore: jobs load by name, and DeleteJob keeps the job's incidents",
                   "[state]", SqliteBackend, MemoryBackend) {
  TestType backend;
  for (const char* name : {"mnist", "bert", "resnet"}) {
    RequireOk(backend.store->PutJob(FullJob(name)));
  }
  RequireOk(backend.store->OpenIncident(FullIncident("bert", 1000)));

  RequireOk(backend.store->DeleteJob("bert"));
  RequireOk(backend.store->DeleteJob("never-existed"));

  std::vector<JobRecord> jobs = RequireOk(backend.store->LoadJobs());
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].name == "mnist");
  CHECK(jobs[1].name == "resnet");
  CHECK(RequireOk(backend.store->ListIncidents("bert", 0)).size() == 1);
}

TEMPLATE_TEST_CASE("StateStore: incidents get ids 1, 2, ... and round-trip every field", "[state]",
                   SqliteBackend, MemoryBackend) {
  TestType backend;
  IncidentRecord first = FullIncident("digits", 1000);
  first.id = 77;  // Ignored: the store assigns ids.
  CHECK(RequireOk(backend.store->OpenIncident(first)) == 1);
  CHECK(RequireOk(backend.store->OpenIncident(FullIncident("digits", 2000))) == 2);

  std::vector<IncidentRecord> listed = RequireOk(backend.store->ListIncidents("digits", 0));
  REQUIRE(listed.size() == 2);
  first.id = 1;
  CHECK(listed[0] == first);
  CHECK(listed[1].started_unix_ms == 2000);
}

TEMPLATE_TEST_CASE("StateStore: UpdateIncident closes an incident (NotFound for an unknown id)",
                   "[state]", SqliteBackend, MemoryBackend) {
  TestType backend;
  IncidentRecord a = FullIncident("a", 1000);
  a.id = RequireOk(backend.store->OpenIncident(a));
  IncidentRecord b = FullIncident("b", 2000);
  b.id = RequireOk(backend.store->OpenIncident(b));

  a.ended_unix_ms = 5000;
  a.reset_result = "failed: quota";
  a.notes += "\nrecovered at step 12000";
  RequireOk(backend.store->UpdateIncident(a));

  std::vector<IncidentRecord> open = RequireOk(backend.store->OpenIncidents());
  REQUIRE(open.size() == 1);
  CHECK(open[0] == b);
  std::vector<IncidentRecord> a_list = RequireOk(backend.store->ListIncidents("a", 0));
  REQUIRE(a_list.size() == 1);
  CHECK(a_list[0] == a);
  CHECK_FALSE(a_list[0].is_open());

  IncidentRecord ghost = FullIncident("ghost", 1000);
  ghost.id = 3;  // Never opened.
  CHECK(backend.store->UpdateIncident(ghost).code() == absl::StatusCode::kNotFound);
  CHECK(RequireOk(backend.store->ListIncidents("ghost", 0)).empty());
}

TEMPLATE_TEST_CASE("StateStore: ListIncidents gives the newest N, oldest first, per job",
                   "[state]", SqliteBackend, MemoryBackend) {
  TestType backend;
  const char* jobs[] = {"a", "b", "a", "a", "b"};  // Ids 1..5.
  for (std::size_t i = 0; i < std::size(jobs); ++i) {
    RequireOk(backend.store->OpenIncident(FullIncident(jobs[i], 1000 * (i + 1))));
  }
  auto ids = [&](const std::string& job, int limit) {
    std::vector<std::int64_t> out;
    for (const IncidentRecord& in : RequireOk(backend.store->ListIncidents(job, limit))) {
      out.push_back(in.id);
    }
    return out;
  };
  CHECK(ids("", 0) == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  CHECK(ids("", 2) == std::vector<std::int64_t>{4, 5});
  CHECK(ids("a", 0) == std::vector<std::int64_t>{1, 3, 4});
  CHECK(ids("a", 2) == std::vector<std::int64_t>{3, 4});
  CHECK(ids("b", -1) == std::vector<std::int64_t>{2, 5});
  CHECK(ids("nobody", 3).empty());
}

TEMPLATE_TEST_CASE("StateStore: malformed records are InvalidArgument and change nothing",
                   "[state]", SqliteBackend, MemoryBackend) {
  TestType backend;
  JobRecord nameless = FullJob("");
  CHECK(backend.store->PutJob(nameless).code() == absl::StatusCode::kInvalidArgument);
  JobRecord negative = FullJob("digits");
  negative.restarts = -1;
  CHECK(backend.store->PutJob(negative).code() == absl::StatusCode::kInvalidArgument);
  IncidentRecord jobless = FullIncident("", 1000);
  CHECK(backend.store->OpenIncident(jobless).status().code() == absl::StatusCode::kInvalidArgument);

  CHECK(RequireOk(backend.store->LoadJobs()).empty());
  CHECK(RequireOk(backend.store->ListIncidents("", 0)).empty());
}

TEMPLATE_TEST_CASE("StateStore: concurrent writers from several threads all land", "[state]",
                   SqliteBackend, MemoryBackend) {
  TestType backend;
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        (void)backend.store->PutJob(FullJob("job-" + std::to_string(t) + "-" + std::to_string(i)));
        (void)backend.store->OpenIncident(FullIncident("job-" + std::to_string(t), i));
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  CHECK(RequireOk(backend.store->LoadJobs()).size() == 30);
  CHECK(RequireOk(backend.store->ListIncidents("", 0)).size() == 30);
}


// The SQLite store's own behaviour: the file, its reopening and its errors.

TEST_CASE("SqliteStateStore: a reopened database has every job and incident", "[state]") {
  TempDir dir;
  IncidentRecord outage = FullIncident("digits", 1000);  // Open when the VM went down.
  {
    std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
    RequireOk(store->PutJob(FullJob("digits")));
    RequireOk(store->PutJob(FullJob("mnist")));
    outage.id = RequireOk(store->OpenIncident(outage));
  }
  std::unique_ptr<StateStore> store = OpenSqlite(dir.path());  // After the "reboot".
  std::vector<JobRecord> jobs = RequireOk(store->LoadJobs());
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0] == FullJob("digits"));
  CHECK(jobs[1] == FullJob("mnist"));
  std::vector<IncidentRecord> open = RequireOk(store->OpenIncidents());
  REQUIRE(open.size() == 1);
  CHECK(open[0] == outage);

  outage.ended_unix_ms = 600'000;  // Closed by the next boot: downtime covers the outage.
  RequireOk(store->UpdateIncident(outage));
  CHECK(RequireOk(store->OpenIncident(FullIncident("digits", 700'000))) == 2);
  store.reset();
  store = OpenSqlite(dir.path());
  CHECK(RequireOk(store->OpenIncidents()).size() == 1);
  CHECK(RequireOk(store->ListIncidents("digits", 0)).front() == outage);
}

TEST_CASE("SqliteStateStore: a write is in the files when PutJob returns, before any close",
          "[state]") {
  TempDir dir;
  std::unique_ptr<StateStore> writer = OpenSqlite(dir.path());  // Never closed before reading.
  RequireOk(writer->PutJob(FullJob("digits")));
  // What a SIGKILL of tpud right now would leave: the files as they are.
  TempDir crashed;
  for (const char* file : {"tpud.db", "tpud.db-wal"}) {
    std::filesystem::copy_file(dir.path() / file, crashed.path() / file);
  }
  std::unique_ptr<StateStore> reader = OpenSqlite(crashed.path());
  std::vector<JobRecord> jobs = RequireOk(reader->LoadJobs());
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0] == FullJob("digits"));
}

TEST_CASE("SqliteStateStore: a second opener is refused while the first holds the file", "[state]") {
  TempDir dir;
  std::unique_ptr<StateStore> first = OpenSqlite(dir.path());
  RequireOk(first->PutJob(FullJob("digits")));
  absl::StatusOr<std::unique_ptr<StateStore>> second = OpenSqliteStateStore(dir.path());
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(second.status().message()), Catch::Matchers::Contains((dir.path() / "tpud.db").string()));
  // Exclusive locking keeps the WAL index in memory: no -shm file to map
  // (and to fault on, SIGBUS, when the disk turns unwritable).
  CHECK_FALSE(std::filesystem::exists(dir.path() / "tpud.db-shm"));
  first.reset();
  CHECK(RequireOk(OpenSqlite(dir.path())->LoadJobs()).size() == 1);  // Free again once closed.
}

TEST_CASE("SqliteStateStore: the database and its WAL are readable by their owner only", "[state]") {
  TempDir dir;
  std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
  RequireOk(store->PutJob(FullJob("digits")));
  for (const char* file : {"tpud.db", "tpud.db-wal"}) {
    INFO(file);
    const auto perms = std::filesystem::status(dir.path() / file).permissions();
    CHECK((perms & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  }
}

TEST_CASE("SqliteStateStore: incidents are pruned to the newest 100 per job", "[state]") {
  TempDir dir;
  std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
  for (int i = 0; i < kIncidentsKeptPerJob + 30; ++i) RequireOk(store->OpenIncident(FullIncident("a", 1000 + i)));
  RequireOk(store->OpenIncident(FullIncident("b", 5)));
  const std::vector<IncidentRecord> kept = RequireOk(store->ListIncidents("a", 0));
  REQUIRE(kept.size() == static_cast<std::size_t>(kIncidentsKeptPerJob));
  CHECK(kept.front().started_unix_ms == 1000 + 30);  // The 30 oldest went.
  CHECK(RequireOk(store->ListIncidents("b", 0)).size() == 1);
}

TEST_CASE("SqliteStateStore: events round-trip, newest kept, and removing a job with history drops them",
          "[state]") {
  TempDir dir;
  std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
  EventRecord event;
  event.job = "digits";
  event.time_unix_ms = 1700000000000;
  event.from_state = "backoff";
  event.to_state = "starting";
  event.reason = "restart 1/3";
  event.attempt = 2;
  event.exit = ExitStatus{-1, 9, false, ""};
  event.checkpoint_path = "/ckpt/ckpt-200.pt";
  event.checkpoint_step = 200;
  event.id = RequireOk(store->AppendEvent(event));
  const std::vector<EventRecord> events = RequireOk(store->ListEvents(10));
  REQUIRE(events.size() == 1);
  CHECK(events[0] == event);
  RequireOk(store->PutJob(FullJob("digits")));
  RequireOk(store->OpenIncident(FullIncident("digits", 7)));
  RequireOk(store->DeleteJob("digits", /*with_history=*/true));
  CHECK(RequireOk(store->ListEvents(10)).empty());
  CHECK(RequireOk(store->ListIncidents("digits", 0)).empty());
}

TEST_CASE("SqliteStateStore: creates state_dir and records the schema version", "[state]") {
  TempDir dir;
  fs::path state_dir = dir.path() / "var" / "lib" / "tpud";
  OpenSqlite(state_dir).reset();  // Closing checkpoints the WAL into tpud.db.
  std::string header = ReadFile(state_dir / "tpud.db");
  REQUIRE(header.size() >= 100);
  CHECK(header.rfind("SQLite format 3", 0) == 0);
  // https://www.sqlite.org/fileformat.html#database_header: big-endian
  // user_version at offset 60, application_id at offset 68.
  auto be32 = [&](std::size_t at) {
    return (std::uint32_t{static_cast<unsigned char>(header[at])} << 24) |
           (std::uint32_t{static_cast<unsigned char>(header[at + 1])} << 16) |
           (std::uint32_t{static_cast<unsigned char>(header[at + 2])} << 8) |
           std::uint32_t{static_cast<unsigned char>(header[at + 3])};
  };
  CHECK(be32(60) == kStateSchemaVersion);
  CHECK(be32(68) == 0x74707564);  // "tpud"
  OpenSqlite(state_dir).reset();  // Runs no migration again (it would fail: the tables exist).
  header = ReadFile(state_dir / "tpud.db");
  CHECK(be32(60) == kStateSchemaVersion);
}

TEST_CASE("SqliteStateStore: a garbage tpud.db is DataLoss naming the file, left untouched",
          "[state]") {
  TempDir dir;
  fs::path db = dir.path() / "tpud.db";
  std::string garbage(8192, 'x');
  garbage.replace(0, 22, "this is not a database");
  WriteFile(db, garbage);

  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenSqliteStateStore(dir.path());
  REQUIRE(store.status().code() == absl::StatusCode::kDataLoss);
  std::string message(store.status().message());
  CHECK_THAT(message, Catch::Contains(db.string()));
  CHECK_THAT(message, Catch::Contains("not a database"));
  CHECK(ReadFile(db) == garbage);
}

TEST_CASE("SqliteStateStore: a database with a corrupt page is DataLoss and left untouched",
          "[state]") {
  TempDir dir;
  {
    std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
    RequireOk(store->PutJob(FullJob("digits")));
  }
  fs::path db = dir.path() / "tpud.db";
  std::string bytes = ReadFile(db);
  REQUIRE(bytes.size() >= 3 * 4096);  // The default page size; page 2 is the jobs table.
  bytes.replace(4096, 4096, std::string(4096, '\xab'));
  WriteFile(db, bytes);

  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenSqliteStateStore(dir.path());
  REQUIRE(store.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(store.status().message()), Catch::Contains(db.string()));
  CHECK(ReadFile(db) == bytes);
}

TEST_CASE("SqliteStateStore: refuses a newer schema and another application's database",
          "[state]") {
  struct Case {
    std::size_t offset;  // Of the big-endian header field to overwrite.
    std::string value;
    std::string says;
  };
  auto [offset, value, says] = GENERATE(values<Case>({
      {60, std::string("\0\0\0\x63", 4), "schema version 99 was written by a newer tpud"},
      {68, std::string("\0\0\0\x07", 4), "not a tpud database"},
  }));
  TempDir dir;
  OpenSqlite(dir.path()).reset();
  fs::path db = dir.path() / "tpud.db";
  std::string bytes = ReadFile(db);
  bytes.replace(offset, 4, value);
  WriteFile(db, bytes);

  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenSqliteStateStore(dir.path());
  REQUIRE(store.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(store.status().message()), Catch::Contains(says));
  CHECK_THAT(std::string(store.status().message()), Catch::Contains(db.string()));
  CHECK(ReadFile(db) == bytes);
}

TEST_CASE("SqliteStateStore: a state_dir that is a file is an error naming it", "[state]") {
  TempDir dir;
  fs::path not_a_dir = dir.path() / "state";
  WriteFile(not_a_dir, "I am a file");
  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenSqliteStateStore(not_a_dir);
  REQUIRE_FALSE(store.ok());
  CHECK_THAT(std::string(store.status().message()), Catch::Contains(not_a_dir.string()));
  CHECK(ReadFile(not_a_dir) == "I am a file");
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("SqliteStateStore: after Sync the database file alone holds every write", "[state]") {
  TempDir dir;
  std::unique_ptr<StateStore> store = OpenSqlite(dir.path());
  RequireOk(store->PutJob(FullJob("digits")));
  RequireOk(store->Sync());  // Checkpoints the WAL (fsynced) into tpud.db.
  // What a power loss could leave if the WAL were lost: tpud.db alone.
  TempDir copy;
  std::filesystem::copy_file(dir.path() / "tpud.db", copy.path() / "tpud.db");
  std::unique_ptr<StateStore> reopened = OpenSqlite(copy.path());
  std::vector<JobRecord> jobs = RequireOk(reopened->LoadJobs());
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0] == FullJob("digits"));
}

}  // namespace
}  // namespace tpud
