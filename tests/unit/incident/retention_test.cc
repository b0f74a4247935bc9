// Which incident bundles tpud removes to stay within incidents.max_bytes and
// incidents.removed_keep_days, and in which order.
#include "daemon/incident/retention.h"

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

namespace tpud::incident {
namespace {

using std::chrono::hours;
using testing::TempDir;

const auto kNow = std::chrono::system_clock::time_point(hours(24 * 1000));

StoredBundle At(const std::string& dir, bool removed, int hours_ago, std::uint64_t bytes, int removed_hours_ago = 0) {
  return StoredBundle{dir, removed, kNow - hours(hours_ago), kNow - hours(removed_hours_ago), bytes};
}

std::vector<std::string> Chosen(const std::vector<StoredBundle>& bundles, const RetentionPolicy& policy,
                                const std::string& keep = "") {
  std::vector<std::string> dirs;
  for (const Removal& r : SelectForRemoval(bundles, policy, kNow, keep)) dirs.push_back(bundles[r.index].dir);
  return dirs;
}

TEST_CASE("Retention: over max_bytes, a removed job's bundles go first, then the oldest, and the new one stays",
          "[bundle]") {
  const std::vector<StoredBundle> bundles = {
      At("d/train/1", false, 50, 400), At("d/train/2", false, 10, 400), At("d/old.removed-1/1", true, 5, 300),
      At("d/eval/7", false, 60, 400), At("d/train/3", false, 0, 400)};
  RetentionPolicy policy{1000, hours(24 * 7)};
  CHECK(Chosen(bundles, policy, "d/train/3") ==
        std::vector<std::string>{"d/old.removed-1/1", "d/eval/7", "d/train/1"});
  // Even alone over the cap, the bundle just captured is kept.
  CHECK(Chosen({At("d/train/3", false, 0, 5000)}, policy, "d/train/3").empty());
  policy.max_bytes = 0;  // No cap.
  CHECK(Chosen(bundles, policy).empty());
}

TEST_CASE("Retention: a removed job's bundles go removed_keep after its removal, whatever the room", "[bundle]") {
  const std::vector<StoredBundle> bundles = {At("d/x.removed-1/1", true, 24 * 9, 1, 24 * 8),
                                             At("d/y.removed-2/1", true, 24 * 100, 1, 24),  // Old, removed lately.
                                             At("d/train/1", false, 24 * 100, 1)};
  const std::vector<Removal> chosen = SelectForRemoval(bundles, RetentionPolicy{1ull << 30, hours(24 * 7)}, kNow, "");
  REQUIRE(chosen.size() == 1);
  CHECK(bundles[chosen[0].index].dir == "d/x.removed-1/1");
  CHECK_THAT(chosen[0].why, Catch::Matchers::Contains("its job was removed"));
}

TEST_CASE("Retention: ApplyRetention removes what it chose, and a removed job's emptied directory", "[bundle]") {
  TempDir dir;
  dir.WriteFile("incidents/train/1/log-tail.txt", std::string(600, 'x'));
  dir.WriteFile("incidents/train/2/log-tail.txt", std::string(600, 'x'));
  dir.WriteFile("incidents/gone.removed-5/1/log-tail.txt", std::string(600, 'x'));  // Removed in 1970.
  const std::vector<std::string> lines =
      ApplyRetention(dir / "incidents", RetentionPolicy{1000, hours(24 * 7)}, dir / "incidents/train/2");
  CHECK(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::Matchers::Contains("its job was removed more than 168 h ago"));
  CHECK_FALSE(std::filesystem::exists(dir / "incidents/gone.removed-5"));
  CHECK_FALSE(std::filesystem::exists(dir / "incidents/train/1"));
  CHECK(std::filesystem::exists(dir / "incidents/train/2/log-tail.txt"));
}

}  // namespace
}  // namespace tpud::incident
