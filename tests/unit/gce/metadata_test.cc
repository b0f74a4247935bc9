// The metadata client and watcher against the metadata server emulator
// (tests/support/gce_metadata_emulator.py, a child process on port 0).
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/gce/metadata_client.h"
#include "daemon/gce/metadata_watcher.h"
#include "tests/support/gce_metadata_emulator.h"

namespace tpud {
namespace {

using namespace std::chrono_literals;
using testing::MetadataEmulator;
using Steady = std::chrono::steady_clock;

double SecondsSince(Steady::time_point start) { return Seconds(Steady::now() - start).count(); }

// Collects watcher callbacks; tests wait on it with a bounded timeout.
class Recorder {
 public:
  void OnChange(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    changes_.emplace_back(key, value);
    cv_.notify_all();
  }
  // True once (key, value) has been reported; false after `limit`.
  bool WaitFor(const std::string& key, const std::string& value, std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] {
      for (const auto& c : changes_) {
        if (c.first == key && c.second == value) return true;
      }
      return false;
    });
  }
  std::vector<std::pair<std::string, std::string>> changes() {
    std::lock_guard<std::mutex> lock(mu_);
    return changes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, std::string>> changes_;
};

MetadataWatcherOptions FastOptions() {
  MetadataWatcherOptions options;
  options.timeout_sec = 30;
  options.backoff_initial = Seconds(0.02);
  options.backoff_max = Seconds(0.2);
  return options;
}

TEST_CASE("MetadataClient: Get returns values with etags and sends Metadata-Flavor", "[metadata]") {
  MetadataEmulator emu;
  MetadataClient client(emu.base_url());
  absl::StatusOr<MetadataValue> zone = client.Get("instance/zone");
  REQUIRE(zone.ok());
  CHECK(zone->value == "projects/123/zones/us-central2-b");
  CHECK_FALSE(zone->etag.empty());
  CHECK(client.Get("/project/project-id")->value == "tpud-test");
  CHECK_THAT(client.Get("instance/service-accounts/default/token")->value, Catch::Contains("\"Bearer\""));
  CHECK(client.Get("instance/attributes/accelerator-type")->value == "v4-8");
  CHECK(client.Probe().ok());

  // The emulator refuses a request without the header, as the real server does.
  HttpRequest bare;
  bare.url = emu.base_url() + "instance/zone";
  CHECK(NewCurlHttpClient()->Get(bare)->status == 403);
}

TEST_CASE("MetadataClient: errors carry the path and a code", "[metadata]") {
  MetadataEmulator emu;
  MetadataClient client(emu.base_url());
  absl::StatusOr<MetadataValue> missing = client.Get("instance/attributes/nope");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("instance/attributes/nope"));
  // wait_for_change is not allowed on the token URL.
  CHECK(client.WaitForChange("instance/service-accounts/default/token", "", 1).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(client.WaitForChange("instance/preempted", "", 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
  emu.Control("fail503?count=1");
  CHECK(client.Get("instance/preempted").status().code() == absl::StatusCode::kUnavailable);
  CHECK(client.Get("instance/preempted").ok());
}

TEST_CASE("MetadataClient: no server, or not a metadata server, is Unavailable", "[metadata]") {
  class NoFlavor final : public HttpClient {
   public:
    absl::StatusOr<HttpResponse> Get(const HttpRequest&) override { return HttpResponse{200, "hi", {}}; }
  };
  MetadataClient impostor("http://127.0.0.1:1/computeMetadata/v1/", std::make_shared<NoFlavor>());
  absl::Status s = impostor.Get("instance/zone").status();
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(s.message()), Catch::Contains("Metadata-Flavor"));

  MetadataClient nobody("http://127.0.0.1:1/computeMetadata/v1/");  // Port 1: connection refused.
  CHECK(nobody.Probe().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("MetadataBaseUrl: config, then GCE_METADATA_HOST, then GCE_METADATA_IP, then the default",
          "[metadata]") {
  ::unsetenv("GCE_METADATA_HOST");
  ::unsetenv("GCE_METADATA_IP");
  CHECK(MetadataBaseUrl() == "http://metadata.google.internal/computeMetadata/v1/");
  ::setenv("GCE_METADATA_IP", "169.254.169.254", 1);
  CHECK(MetadataBaseUrl() == "http://169.254.169.254/computeMetadata/v1/");
  ::setenv("GCE_METADATA_HOST", "localhost:8080", 1);
  CHECK(MetadataBaseUrl() == "http://localhost:8080/computeMetadata/v1/");
  CHECK(MetadataBaseUrl("10.0.0.1:99") == "http://10.0.0.1:99/computeMetadata/v1/");
  ::unsetenv("GCE_METADATA_HOST");
  ::unsetenv("GCE_METADATA_IP");
}

TEST_CASE("MetadataClient: WaitForChange returns promptly after a flip", "[metadata]") {
  MetadataEmulator emu;
  MetadataClient client(emu.base_url());
  absl::StatusOr<MetadataValue> before = client.Get(kMaintenanceEventKey);
  REQUIRE(before.ok());
  CHECK(before->value == "NONE");

  auto waiting = std::async(std::launch::async,
                            [&] { return client.WaitForChange(kMaintenanceEventKey, before->etag, 30); });
  REQUIRE(emu.WaitForWaiters(1));
  const auto flipped = Steady::now();
  emu.Control("set?key=instance/maintenance-event&value=TERMINATE_ON_HOST_MAINTENANCE");
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  CHECK(SecondsSince(flipped) < 2);
  absl::StatusOr<MetadataValue> after = waiting.get();
  REQUIRE(after.ok());
  CHECK(after->value == "TERMINATE_ON_HOST_MAINTENANCE");
  CHECK(after->etag != before->etag);

  // A stale etag answers at once; the current one waits out timeout_sec.
  CHECK(client.WaitForChange(kMaintenanceEventKey, before->etag, 30)->value ==
        "TERMINATE_ON_HOST_MAINTENANCE");
  const auto start = Steady::now();
  absl::StatusOr<MetadataValue> same = client.WaitForChange(kMaintenanceEventKey, after->etag, 1);
  REQUIRE(same.ok());
  CHECK(same->etag == after->etag);
  CHECK(SecondsSince(start) >= 0.9);
}

TEST_CASE("MetadataClient: a cancelled long poll returns Cancelled at once", "[metadata]") {
  MetadataEmulator emu;
  MetadataClient client(emu.base_url());
  const std::string etag = client.Get(kPreemptedKey)->etag;
  HttpCancel cancel;
  auto waiting =
      std::async(std::launch::async, [&] { return client.WaitForChange(kPreemptedKey, etag, 60, &cancel); });
  REQUIRE(emu.WaitForWaiters(1));
  const auto start = Steady::now();
  cancel.Cancel();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  CHECK(SecondsSince(start) < 0.5);
  CHECK(waiting.get().status().code() == absl::StatusCode::kCancelled);
}

TEST_CASE("MetadataWatcher: reports initial values, a maintenance event and a preemption", "[metadata]") {
  MetadataEmulator emu;
  Recorder recorder;
  MetadataWatcher watcher(
      std::make_shared<MetadataClient>(emu.base_url()),
      [&](const std::string& k, const std::string& v) { recorder.OnChange(k, v); }, FastOptions());
  watcher.Start();
  REQUIRE(recorder.WaitFor(kPreemptedKey, "FALSE"));
  REQUIRE(recorder.WaitFor(kMaintenanceEventKey, "NONE"));
  REQUIRE(emu.WaitForWaiters(2));

  emu.Control("set?key=instance/maintenance-event&value=TERMINATE_ON_HOST_MAINTENANCE");
  CHECK(recorder.WaitFor(kMaintenanceEventKey, "TERMINATE_ON_HOST_MAINTENANCE"));
  emu.Control("set?key=instance/preempted&value=TRUE");
  CHECK(recorder.WaitFor(kPreemptedKey, "TRUE"));
  watcher.Stop();
  CHECK(recorder.changes().size() == 4);  // Each value once: no repeats on long-poll timeouts.
}

TEST_CASE("MetadataWatcher: 503s are retried and a change during them is not lost", "[metadata]") {
  MetadataEmulator emu;
  emu.Control("fail503?count=3");
  Recorder recorder;
  MetadataWatcherOptions options = FastOptions();
  options.timeout_sec = 1;
  MetadataWatcher watcher(
      std::make_shared<MetadataClient>(emu.base_url()),
      [&](const std::string& k, const std::string& v) { recorder.OnChange(k, v); }, options);
  watcher.Start();
  REQUIRE(recorder.WaitFor(kPreemptedKey, "FALSE"));
  REQUIRE(recorder.WaitFor(kMaintenanceEventKey, "NONE"));
  CHECK(emu.Stat("served_503") == 3);

  // An outage (long polls of 1 s run into 503s), and a change during it.
  emu.Control("fail503?count=6");
  const auto give_up = Steady::now() + 10s;
  while (emu.Stat("served_503") < 3 + 4 && Steady::now() < give_up) std::this_thread::sleep_for(5ms);
  REQUIRE(emu.Stat("served_503") >= 3 + 4);  // The outage is under way.
  emu.Control("set?key=instance/maintenance-event&value=MIGRATE_ON_HOST_MAINTENANCE");
  CHECK(recorder.WaitFor(kMaintenanceEventKey, "MIGRATE_ON_HOST_MAINTENANCE"));
}

TEST_CASE("MetadataWatcher: Stop is prompt during long polls and during backoff", "[metadata]") {
  SECTION("long polls in flight") {
    MetadataEmulator emu;
    Recorder recorder;
    MetadataWatcherOptions options = FastOptions();
    options.timeout_sec = 300;
    MetadataWatcher watcher(
        std::make_shared<MetadataClient>(emu.base_url()),
        [&](const std::string& k, const std::string& v) { recorder.OnChange(k, v); }, options);
    watcher.Start();
    REQUIRE(emu.WaitForWaiters(2));
    const auto start = Steady::now();
    watcher.Stop();
    CHECK(SecondsSince(start) < 0.5);
  }
  SECTION("backing off after failures") {
    struct Failing final : public HttpClient {
      absl::StatusOr<HttpResponse> Get(const HttpRequest&) override {
        std::lock_guard<std::mutex> lock(mu);
        ++calls;
        cv.notify_all();
        return absl::UnavailableError("connection refused");
      }
      std::mutex mu;
      std::condition_variable cv;
      int calls = 0;
    };
    auto http = std::make_shared<Failing>();
    MetadataWatcherOptions options;
    options.backoff_initial = Seconds(30);
    Recorder recorder;
    MetadataWatcher watcher(
        std::make_shared<MetadataClient>("http://unused/", http),
        [&](const std::string& k, const std::string& v) { recorder.OnChange(k, v); }, options);
    watcher.Start();
    {
      std::unique_lock<std::mutex> lock(http->mu);
      REQUIRE(http->cv.wait_for(lock, 10s, [&] { return http->calls >= 2; }));  // Both keys failed once.
    }
    const auto start = Steady::now();
    watcher.Stop();
    CHECK(SecondsSince(start) < 0.5);
    CHECK(http->calls == 2);
    CHECK(recorder.changes().empty());
  }
}

}  // namespace
}  // namespace tpud
