// Reading the filesystem as a job's user: ScopedFsIdentity changes only the
// calling thread, and only while it lives.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>

#include "daemon/process/run_as.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;

bool CanList(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  return !ec;
}

TEST_CASE("ScopedFsIdentity: the thread reads as the user while it lives, other threads as tpud", "[process]") {
  if (::geteuid() != 0) return;  // Only root can take another identity.
  absl::StatusOr<std::optional<RunAs>> nobody = ResolveRunAs("nobody", "");
  if (!nobody.ok() || !*nobody) return;
  char pattern[] = "/tmp/tpud-fsid-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const fs::path root_only = fs::path(pattern) / "private";
  fs::create_directories(root_only);
  fs::permissions(fs::path(pattern), fs::perms(0755));
  fs::permissions(root_only, fs::perms(0700));
  // A thread that exists before the switch (a new one would inherit its
  // creator's credentials) keeps tpud's.
  std::promise<void> go;
  std::future<bool> other = std::async(std::launch::async, [&, ready = go.get_future()]() mutable {
    ready.wait();
    return CanList(root_only);
  });
  {
    ScopedFsIdentity as(*nobody);
    REQUIRE(as.status().ok());
    CHECK_FALSE(CanList(root_only));
    CHECK(CanList(pattern));
    go.set_value();
    CHECK(other.get());
  }
  CHECK(CanList(root_only));  // Restored, capabilities included.
  {
    ScopedFsIdentity as_tpud(std::nullopt);
    CHECK(as_tpud.status().ok());
    CHECK(CanList(root_only));
  }
  fs::remove_all(pattern);
}

}  // namespace
}  // namespace tpud
