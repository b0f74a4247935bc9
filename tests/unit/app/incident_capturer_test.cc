// The incident capture worker: a capture stuck on a process cannot hold
// tpud's exit, and a removed job's bundles are moved aside, not met by a new
// job of the same name. Real files, a real sleeping process, a fake eu-stack.
#include "daemon/app/incident_link.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/sleeping_child.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;
using testing::SleepingChild;
using testing::TempDir;

incident::CaptureOptions Options(const TempDir& dir) {
  incident::CaptureOptions options;
  options.dir = dir / "incidents";
  options.kmsg = dir / "kmsg";
  options.eu_stack = "/nonexistent/eu-stack";
  options.capture_seconds = std::chrono::seconds(60);
  return options;
}

incident::CaptureRequest Request(std::int64_t number, int attempt) {
  incident::CaptureRequest request;
  request.job = "digits";
  request.number = number;
  request.attempt = attempt;
  request.trigger = "exit";
  request.reason = "exit code 1";
  return request;
}

// Runs `io` until `done` or 10 s.
bool RunUntil(boost::asio::io_context& io, const bool& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
  }
  return done;
}

}  // namespace

TEST_CASE("IncidentCapturer: a capture stuck on a process does not hold tpud's exit", "[bundle]") {
  TempDir dir;
  SleepingChild child;
  REQUIRE(child.WaitAsleep());  // Not in D: its stacks are asked for.
  // An eu-stack that never finishes, like one attached to a process wedged in the kernel.
  const fs::path eu_stack = dir.WriteFile("eu-stack", "#!/bin/sh\nexec sleep 30\n");
  fs::permissions(eu_stack, fs::perms::owner_all);
  incident::CaptureOptions options = Options(dir);
  options.eu_stack = eu_stack.string();
  boost::asio::io_context io;
  auto capturer = std::make_unique<IncidentCapturer>(io, options, nullptr);
  incident::CaptureRequest request = Request(1, 1);
  request.trigger = "hang";
  request.pid = child.pid();
  bool done = false;
  capturer->Capture(request, [&] { done = true; });
  // The /proc part is written before the stacks are asked for.
  const fs::path status = dir / ("incidents/digits/1/proc/" + std::to_string(child.pid()) + "/status");
  for (int i = 0; i < 200 && !fs::exists(status); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(fs::exists(status));

  const auto start = std::chrono::steady_clock::now();
  capturer.reset();
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < IncidentCapturer::kShutdownWait + std::chrono::seconds(5));  // Not the 30 s of the stuck eu-stack.
  io.restart();
  io.poll();
  CHECK_FALSE(done);  // The loop may be gone: the left capture never calls back.
}

TEST_CASE("IncidentCapturer: a removed job's bundles are moved aside, after the captures asked before",
          "[bundle]") {
  TempDir dir;
  const incident::CaptureOptions options = Options(dir);
  boost::asio::io_context io;
  IncidentCapturer capturer(io, options, nullptr);
  bool first = false;
  capturer.Capture(Request(1, 1), [&] { first = true; });
  capturer.Retire("digits");  // Queued behind the capture: bundle 1 is written, then moved.
  bool second = false;
  capturer.Capture(Request(1, 1), [&] { second = true; });  // The new job of the same name.
  REQUIRE(RunUntil(io, first));
  REQUIRE(RunUntil(io, second));

  std::vector<fs::path> retired;
  for (const auto& entry : fs::directory_iterator(options.dir)) {
    if (entry.path().filename().string().rfind("digits.removed-", 0) == 0) retired.push_back(entry.path());
  }
  REQUIRE(retired.size() == 1);
  CHECK(fs::exists(retired[0] / "1/summary.json"));
  CHECK(fs::exists(options.dir / "digits/1/summary.json"));
  // The new job's bundle 1 did not meet the old one.
  CHECK(nlohmann::json::parse(dir.Read("incidents/digits/1/summary.json"))["notes"].dump().find("captured earlier") ==
        std::string::npos);
  CHECK(incident::ListBundles(options.dir, "digits") == std::vector<std::int64_t>{1});
}

}  // namespace tpud
