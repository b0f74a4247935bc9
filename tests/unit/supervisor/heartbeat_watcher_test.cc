// The heartbeat watcher on a real temp directory: inotify events, in order.
#include "daemon/supervisor/heartbeat_watcher.h"
#include "tests/support/temp_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tpud {
namespace {

namespace fs = std::filesystem;
using tpud::testing::TempDir;

void Write(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::app);
  out << text;
}

void SetMtime(const fs::path& file, long seconds) {
  timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
}

// Runs the loop until `beats` reaches `want` (bounded by 5 s of wall time).
void RunUntil(boost::asio::io_context& io, const int& beats, int want) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (beats < want && std::chrono::steady_clock::now() < give_up) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
}

TEST_CASE("HeartbeatWatcher: reports creation and each mtime change of the file only", "[heartbeat]") {
  TempDir dir;
  const fs::path file = dir.path() / "hb";
  boost::asio::io_context io;
  int beats = 0;
  auto watcher = HeartbeatWatcher::Start(io, file, [&] { ++beats; });
  REQUIRE(watcher.ok());

  Write(dir.path() / "other", "x");  // Same directory, other name: no beat.
  Write(file, "1");                // Creation: a beat.
  RunUntil(io, beats, 1);
  CHECK(beats == 1);

  SetMtime(file, 1'000'000);  // A touch to a new time (IN_ATTRIB).
  RunUntil(io, beats, 2);
  CHECK(beats == 2);

  SetMtime(file, 1'000'000);       // Same mtime again: not a beat...
  Write(dir.path() / "other", "y");  // ...(still filtered)...
  SetMtime(file, 2'000'000);       // ...but this is; events arrive in order.
  RunUntil(io, beats, 3);
  CHECK(beats == 3);
  io.poll();  // Drain anything left: no extra beat for the repeated mtime.
  CHECK(beats == 3);
}

TEST_CASE("HeartbeatWatcher: an atomic replace (write tmp, rename) is a beat", "[heartbeat]") {
  TempDir dir;
  const fs::path file = dir.path() / "hb";
  Write(file, "old");
  SetMtime(file, 1'000'000);
  boost::asio::io_context io;
  int beats = 0;
  auto watcher = HeartbeatWatcher::Start(io, file, [&] { ++beats; });
  REQUIRE(watcher.ok());
  Write(dir.path() / "hb.tmp", "new");
  fs::rename(dir.path() / "hb.tmp", file);
  RunUntil(io, beats, 1);
  CHECK(beats == 1);
}

TEST_CASE("HeartbeatWatcher: no beat after destruction, a missing directory is NotFound", "[heartbeat]") {
  TempDir dir;
  const fs::path file = dir.path() / "hb";
  boost::asio::io_context io;
  int beats = 0;
  auto watcher = HeartbeatWatcher::Start(io, file, [&] { ++beats; });
  REQUIRE(watcher.ok());
  Write(file, "1");
  watcher->reset();
  io.poll();
  CHECK(beats == 0);

  auto missing = HeartbeatWatcher::Start(io, dir.path() / "nope" / "hb", [] {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("nope"));
}

}  // namespace
}  // namespace tpud
