// Incident bundles through the real binaries: a real process hung in a known
// function is captured (its stacks name the function) before the ladder
// stops it; a crash gets a bundle with its log tail and verdict; `tpuctl
// incident` shows and packs them; capture can be turned off.
#include <catch2/catch.hpp>

#include "tests/integration/adversity.h"
#include "tests/integration/harness.h"
#include "tests/integration/job_events.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using json = nlohmann::json;

const std::string kOneAttempt = "  restart: {max_restarts: 0}\n  stop: {grace_seconds: 2}\n";

}  // namespace

TEST_CASE("Incident bundles: a hung process's stacks show where it is stuck, captured before the first signal",
          "[integration][incident]") {
  TempDir dir;
  TpudProcess tpud(dir,
                   "- name: hangs\n"
                   "  command: [" + YamlQuote(TPUD_BLOCKED_BIN) + "]\n"
                   "  start_seconds: 0.2\n"
                   "  progress: {regex: 'step=(\\d+)', startup_grace_seconds: 30, timeout_seconds: 1}\n" +
                       kOneAttempt,
                   "incidents: {capture_seconds: 20}\n");
  REQUIRE(tpud.Tpuctl({"start", "hangs"}).exit_code == 0);
  const json failed = tpud.WaitForState("hangs", "failed", Seconds(40));
  REQUIRE(failed["state"] == "failed");

  const std::filesystem::path bundle = dir / "state/incidents/hangs/1";
  const std::string stacks = ReadFile(bundle / "stacks.txt");
  INFO("stacks.txt:\n" << stacks << "\nsummary.json:\n" << ReadFile(bundle / "summary.json"));
  // The process was alive and blocked when captured: the default ladder's
  // first rung (SIGINT) kills this program at once, so stacks taken after it
  // would be empty.
  CHECK_THAT(stacks, Contains("tpud_test_all_reduce_wait"));
  CHECK_THAT(stacks, Contains("pause"));
  const json summary = json::parse(ReadFile(bundle / "summary.json"));
  CHECK(summary["trigger"] == "hang");
  CHECK(summary["verdict"]["class"] == "hang");
  REQUIRE(summary["processes"].size() >= 1);
  const int pid = summary["processes"][0]["pid"];
  CHECK(summary["processes"][0]["comm"] == "tpud_blocked_in");  // comm is cut at 15 bytes.
  CHECK_THAT(ReadFile(bundle / ("proc/" + std::to_string(pid) + "/status")), Contains("State:\tS (sleeping)"));
  CHECK_THAT(ReadFile(bundle / "log-tail.txt"), Contains("step=1 loss=0.5"));
  CHECK_THAT(ReadFile(bundle / "env.txt"), Contains("TPUD_JOB=hangs\n"));
  // The hang's exit takes no second bundle over the first.
  CHECK(ReadFile(bundle / "stacks.txt") == stacks);

  const CommandResult shown = tpud.Tpuctl({"incident", "hangs"});
  INFO(shown.out << shown.err);
  CHECK(shown.exit_code == 0);
  CHECK_THAT(shown.out, Contains("incident 1 of hangs, attempt 1 (hang)"));
  CHECK_THAT(shown.out, Contains("verdict:    hang -> "));
  CHECK_THAT(shown.out, Contains("pid " + std::to_string(pid) + " tpud_blocked_in state S"));
  CHECK_THAT(shown.out, Contains("stacks.txt"));
  CHECK_THAT(shown.out, Contains("files in " + bundle.string()));

  const std::filesystem::path tar = dir / "bundle.tar";
  const CommandResult packed = tpud.Tpuctl({"incident", "hangs", "1", "--tar", tar.string()});
  INFO(packed.out << packed.err);
  REQUIRE(packed.exit_code == 0);
  CHECK_THAT(packed.out, Contains("to " + tar.string()));
  const CommandResult listed = RunCommand({"tar", "-xOf", tar.string(), "hangs-incident-1/stacks.txt"});
  CHECK(listed.exit_code == 0);
  CHECK(listed.out == stacks);

  const CommandResult missing = tpud.Tpuctl({"incident", "hangs", "5"});
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.err, Contains("job \"hangs\" has no incident bundle 5"));
  const CommandResult escape = tpud.Tpuctl({"incident", "../state"});
  CHECK(escape.exit_code != 0);
  CHECK_THAT(escape.err, Contains("must match"));
}

TEST_CASE("Incident bundles: a crash gets its log tail and verdict, and with capture off nothing is written",
          "[integration][incident]") {
  TempDir dir;
  const std::string crash =
      "echo 'loading'; echo 'F0000 00:00:1717141650.893 1 tpu_compiler.cc:10] Check failed: ok' >&2; kill -ABRT $$";
  {
    TpudProcess tpud(dir, ShellJob("crashes", crash, kOneAttempt), "");
    REQUIRE(tpud.Tpuctl({"start", "crashes"}).exit_code == 0);
    REQUIRE(tpud.WaitForState("crashes", "failed", Seconds(20))["state"] == "failed");
    REQUIRE(WaitFor([&] { return std::filesystem::exists(dir / "state/incidents/crashes/1/summary.json"); },
                    Seconds(15)));
    const std::filesystem::path bundle = dir / "state/incidents/crashes/1";
    CHECK_THAT(ReadFile(bundle / "log-tail.txt"), Contains("Check failed: ok"));
    const json summary = json::parse(ReadFile(bundle / "summary.json"));
    CHECK(summary["trigger"] == "exit");
    CHECK(summary["verdict"]["class"] == "crash");
    CHECK_THAT(summary["verdict"]["line"].get<std::string>(), Contains("Check failed: ok"));
    CHECK_THAT(summary["reason"].get<std::string>(), Contains("SIGABRT"));
    CHECK_FALSE(std::filesystem::exists(bundle / "stacks.txt"));
    const CommandResult json_out = tpud.Tpuctl({"incident", "crashes", "--json"});
    CHECK(json_out.exit_code == 0);
    CHECK(json::parse(json_out.out)["incident"] == 1);
  }
  TempDir off;
  TpudProcess tpud(off, ShellJob("crashes", crash, kOneAttempt), "incidents: {capture: false}\n");
  REQUIRE(tpud.Tpuctl({"start", "crashes"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("crashes", "failed", Seconds(20))["state"] == "failed");
  const CommandResult none = tpud.Tpuctl({"incident", "crashes"});
  CHECK(none.exit_code != 0);
  CHECK_THAT(none.err, Contains("job \"crashes\" has no incident bundle"));
  CHECK_FALSE(std::filesystem::exists(off / "state/incidents/crashes"));
}

TEST_CASE("Incident bundles: a removed job's bundles are kept aside, and a new job of its name starts at bundle 1",
          "[integration][incident]") {
  TempDir dir;
  TpudProcess tpud(dir, "");
  const std::filesystem::path incidents = dir / "state/incidents";
  auto fail_once = [&](const std::string& marker) {
    REQUIRE(tpud.Tpuctl({"start", "adhoc", "--", "/bin/sh", "-c", "echo " + marker + "; exit 3"}).exit_code == 0);
    REQUIRE(WaitFor([&] { return std::filesystem::exists(incidents / "adhoc/1/summary.json"); }, Seconds(15)));
    REQUIRE(tpud.Tpuctl({"stop", "adhoc", "--wait"}).exit_code == 0);
  };
  fail_once("first-job");
  REQUIRE(tpud.Tpuctl({"remove", "adhoc"}).exit_code == 0);
  REQUIRE(WaitFor([&] { return !std::filesystem::exists(incidents / "adhoc"); }, Seconds(10)));
  fail_once("second-job");
  std::vector<std::filesystem::path> kept;
  for (const auto& entry : std::filesystem::directory_iterator(incidents)) {
    if (entry.path().filename().string().rfind("adhoc.removed-", 0) == 0) kept.push_back(entry.path());
  }
  REQUIRE(kept.size() == 1);
  CHECK_THAT(ReadFile(kept[0] / "1/log-tail.txt"), Contains("first-job"));
  CHECK_THAT(ReadFile(incidents / "adhoc/1/log-tail.txt"), Contains("second-job"));
  CHECK_THAT(ReadFile(kept[0] / "1/log-tail.txt"), !Contains("second-job"));  // Not overwritten.
}

}  // namespace tpud::testing

namespace tpud::testing {

TEST_CASE("Incident bundles: a member reads its own job's bundle, never root's, and bundles are root's on disk",
          "[integration][incident]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0755));
  TpudProcess tpud(dir,
                   "- name: roots\n"
                   "  command: [/bin/sh, -c, 'echo secret-of-root; exit 3']\n"
                   "  env: {DATABASE_URL: 'postgres://app:hunter2@db/prod'}\n" + kOneAttempt,
                   "socket_group: users\n");
  REQUIRE(tpud.Tpuctl({"start", "roots"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("roots", "failed")["state"] == "failed");
  REQUIRE(WaitFor([&] { return std::filesystem::exists(dir / "state/incidents/roots/1/summary.json"); }, Seconds(10)));
  const CommandResult denied = TpuctlAsNobody(tpud, "users", {"incident", "roots"});
  CHECK(denied.exit_code != 0);
  CHECK_THAT(denied.err, Contains("only the user it ran as and root may read it"));
  CHECK_THAT(denied.out + denied.err, !Contains("secret-of-root"));
  // On disk the bundle is root's alone.
  CHECK((std::filesystem::status(dir / "state/incidents").permissions() & std::filesystem::perms::all) ==
        std::filesystem::perms(0700));

  REQUIRE(TpuctlAsNobody(tpud, "users", {"start", "mine", "--", "/bin/sh", "-c", "echo mine-failed; exit 3"})
              .exit_code == 0);
  REQUIRE(WaitFor([&] { return std::filesystem::exists(dir / "state/incidents/mine/1/summary.json"); },
                  Seconds(30)));
  const CommandResult own = TpuctlAsNobody(tpud, "users", {"incident", "mine", "1"});
  INFO(own.out << own.err);
  CHECK(own.exit_code == 0);
  CHECK_THAT(own.out, Contains("incident 1 of mine"));
}

}  // namespace tpud::testing

namespace tpud::testing {

TEST_CASE("Incident bundles: all bundles stay within incidents.max_bytes, the newest kept", "[integration][incident]") {
  TempDir dir;
  TpudProcess tpud(dir,
                   "- name: loud\n"
                   "  command: [/bin/sh, -c, 'for i in $(seq 1 200); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done; exit 3']\n"
                   "  restart: {max_restarts: 5, backoff_initial_seconds: 0.1, backoff_max_seconds: 0.1}\n",
                   "incidents: {max_bytes: 30KB}\n");
  REQUIRE(tpud.Tpuctl({"start", "loud"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("loud", "failed", Seconds(60))["state"] == "failed");
  const std::filesystem::path newest = dir / "state/incidents/loud/6/summary.json";
  REQUIRE(WaitFor([&] { return std::filesystem::exists(newest); }, Seconds(20)));
  std::uint64_t total = 0;
  int bundles = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "state/incidents")) {
    if (entry.is_regular_file()) total += entry.file_size();
    if (entry.is_directory() && entry.path().parent_path().filename() == "loud") ++bundles;
  }
  INFO(total << " bytes in " << bundles << " bundles");
  CHECK(total <= 30000);
  CHECK(bundles >= 1);
  CHECK(bundles < 6);  // Each bundle is over 9 KB: six would not fit.
  CHECK_THAT(tpud.StderrText(), Contains("over incidents.max_bytes (30000)"));
}

}  // namespace tpud::testing
