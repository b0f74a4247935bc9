// The "api" TPU backend against the Cloud TPU emulator
// (tests/support/cloud_tpu_emulator.py) and the metadata server emulator
// (token, project, zone), both child processes on port 0, with short real
// delays. Retry timing runs on simulated time with a scripted HTTP fake.
#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/tpu/tpu_control.h"
#include "tests/support/fake_wait_clock.h"
#include "tests/support/cloud_tpu_emulator.h"
#include "tests/support/gce_metadata_emulator.h"

namespace tpud {
namespace {

using testing::CloudTpuEmulator;
using testing::MetadataEmulator;

constexpr char kNode[] = "projects/tpud-test/locations/us-central2-b/nodes/tpu-1";
constexpr char kNodePath[] = "/v2/projects/tpud-test/locations/us-central2-b/nodes/tpu-1";
constexpr char kOpsPath[] = "/v2/projects/tpud-test/locations/us-central2-b/operations/";

// Both emulators and an "api" TpuControl wired to them.
struct ApiRig {
  MetadataEmulator metadata;
  CloudTpuEmulator tpu;
  std::unique_ptr<TpuControl> control;
  std::vector<std::string> progress;

  explicit ApiRig(double timeout_seconds = 10, std::vector<std::string> tpu_args = {"--op-delay", "0.1"})
      : tpu(tpu_args) {
    TpuConfig config;
    config.backend = "api";
    config.name = "tpu-1";  // Project and zone come from the metadata server.
    config.api_endpoint = tpu.endpoint();
    config.timeout_seconds = timeout_seconds;
    config.poll_interval_seconds = 0.02;
    config.retry_initial_seconds = 0.01;
    config.max_attempts = 3;
    TpuDeps deps;
    deps.metadata = std::make_shared<MetadataClient>(metadata.base_url());
    control = *MakeTpuControl(config, deps);
  }
  TpuCall Call(CancelToken* cancel = nullptr) {
    TpuCall call;
    call.cancel = cancel;
    call.progress = [this](const std::string& line) { progress.push_back(line); };
    return call;
  }
};

// The request log with consecutive repeats (polls) folded into one.
std::vector<std::string> Folded(const std::vector<std::string>& requests) {
  std::vector<std::string> out;
  for (const std::string& r : requests) {
    if (out.empty() || out.back() != r) out.push_back(r);
  }
  return out;
}

bool Has(const std::vector<std::string>& lines, const std::string& wanted) {
  for (const std::string& line : lines) {
    if (line.find(wanted) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("TPU api: Reset stops, starts and waits for READY+HEALTHY with the documented calls", "[tpu]") {
  ApiRig rig;
  REQUIRE(rig.control->name() == "api");
  absl::Status reset = rig.control->Reset(rig.Call());
  REQUIRE(reset.ok());

  const std::string node = kNodePath, ops = kOpsPath;
  CHECK(Folded(rig.tpu.Requests()) == std::vector<std::string>{
                                          "GET " + node + " 200",
                                          "POST " + node + ":stop 200",
                                          "GET " + ops + "operation-123 200",
                                          "GET " + node + " 200",
                                          "POST " + node + ":start 200",
                                          "GET " + ops + "operation-124 200",
                                          "GET " + node + " 200",
                                      });
  CHECK(Has(rig.progress, "stop requested (operation operation-123)"));
  CHECK(Has(rig.progress, "operation operation-123 done"));
  CHECK(Has(rig.progress, "state STOPPED"));
  CHECK(Has(rig.progress, "operation operation-124 done"));
  CHECK(rig.progress.back() == "state READY, health HEALTHY");

  absl::StatusOr<TpuNode> described = rig.control->Describe(nullptr);
  REQUIRE(described.ok());
  CHECK(described->name == kNode);
  CHECK(described->state == "READY");
  CHECK(described->health == "HEALTHY");
  CHECK(described->accelerator_type == "v4-8");
}

TEST_CASE("TPU api: the token and target are fetched once and reused across calls", "[tpu]") {
  ApiRig rig;
  REQUIRE(rig.control->Describe(nullptr).ok());
  CHECK(rig.metadata.Stat("requests") == 3);  // project-id, zone, token.
  REQUIRE(rig.control->Reset(rig.Call()).ok());
  REQUIRE(rig.control->Describe(nullptr).ok());
  CHECK(rig.metadata.Stat("requests") == 3);
}

TEST_CASE("TPU api: 403 and 404 name the node and keep the API's message", "[tpu]") {
  ApiRig rig;
  SECTION("403") {
    rig.tpu.Control("fault?node=tpu-1&status=403");
    absl::Status s = rig.control->Reset(rig.Call());
    CHECK(s.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(s.message()),
               Catch::StartsWith(std::string("permission denied on node ") + kNode) &&
                   Catch::Contains("Permission 'tpu.nodes.get' denied"));
  }
  SECTION("404") {
    rig.tpu.Control("fault?node=tpu-1&status=404");
    absl::StatusOr<TpuNode> node = rig.control->Describe(nullptr);
    CHECK(node.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(node.status().message()),
               Catch::StartsWith(std::string("node ") + kNode + " not found"));
  }
  CHECK(rig.tpu.Requests().size() == 1);  // Not retried.
}

TEST_CASE("TPU api: an operation that ends in error fails the reset with its code and message", "[tpu]") {
  ApiRig rig;
  rig.tpu.Control("op_error?node=tpu-1&verb=start&code=9&message=Quota%20exceeded%20for%20TPUS");
  absl::Status s = rig.control->Reset(rig.Call());
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("start operation") && Catch::Contains("Quota exceeded for TPUS (code 9)"));
  CHECK(Has(rig.progress, "failed: Quota exceeded"));
}

TEST_CASE("TPU api: a node stuck in STARTING past the timeout gives DeadlineExceeded naming the state",
          "[tpu]") {
  ApiRig rig(/*timeout_seconds=*/1.5);
  rig.tpu.Control("stuck?node=tpu-1&state=STARTING");
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = rig.control->Reset(rig.Call());
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(s.message()),
             Catch::StartsWith(std::string("node ") + kNode + " stuck in STARTING for"));
  CHECK(Has(rig.progress, "state STARTING"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("TPU api: READY with UNHEALTHY_MAINTENANCE is not reset-complete, but is started", "[tpu]") {
  ApiRig rig(/*timeout_seconds=*/1.5);
  rig.tpu.Control("stuck?node=tpu-1&state=READY&health=UNHEALTHY_MAINTENANCE");
  absl::Status reset = rig.control->Reset(rig.Call());
  CHECK(reset.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(reset.message()),
             Catch::Contains("stuck in READY with health UNHEALTHY_MAINTENANCE"));
  CHECK(rig.control->Start(rig.Call()).ok());  // Start waits for READY only.
}

TEST_CASE("TPU api: Start starts a STOPPED node and leaves a READY one alone", "[tpu]") {
  ApiRig rig;
  rig.tpu.Control("set_node?node=tpu-1&state=STOPPED");
  REQUIRE(rig.control->Start(rig.Call()).ok());
  CHECK(rig.tpu.Node("tpu-1")["state"] == "READY");
  rig.tpu.Control("clear_requests");
  REQUIRE(rig.control->Start(rig.Call()).ok());
  CHECK(rig.tpu.Requests() == std::vector<std::string>{"GET " + std::string(kNodePath) + " 200"});
}

TEST_CASE("TPU api: Reset of a node already STOPPING waits for STOPPED and starts it", "[tpu]") {
  ApiRig rig;
  rig.tpu.Control("set_node?node=tpu-1&state=STOPPING");
  auto stop_later = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rig.tpu.Control("set_node?node=tpu-1&state=STOPPED");
  });
  REQUIRE(rig.control->Reset(rig.Call()).ok());
  stop_later.get();
  CHECK(Has(rig.progress, "node already STOPPING: no stop needed"));
  const std::string node = kNodePath;
  CHECK(Folded(rig.tpu.Requests()) ==
        std::vector<std::string>{"GET " + node + " 200", "POST " + node + ":start 200",
                                 "GET " + std::string(kOpsPath) + "operation-123 200",
                                 "GET " + node + " 200"});
}

TEST_CASE("TPU api: 503s are retried with backoff, up to max_attempts", "[tpu]") {
  ApiRig rig;
  SECTION("two 503s then success") {
    rig.tpu.Control("fail503?count=2");
    REQUIRE(rig.control->Describe(nullptr).ok());
    const std::string get = "GET " + std::string(kNodePath);
    CHECK(rig.tpu.Requests() == std::vector<std::string>{get + " 503", get + " 503", get + " 200"});
  }
  SECTION("more 503s than attempts") {
    rig.tpu.Control("fail503?count=5");
    absl::StatusOr<TpuNode> node = rig.control->Describe(nullptr);
    CHECK(node.status().code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(node.status().message()), Catch::Contains("gave up after 3 attempt(s)"));
    CHECK(rig.tpu.Requests().size() == 3);
  }
}

TEST_CASE("TPU api: a rejected token is refreshed once, then Unauthenticated", "[tpu]") {
  ApiRig rig(10, {"--token", "some-other-token"});
  absl::StatusOr<TpuNode> node = rig.control->Describe(nullptr);
  CHECK(node.status().code() == absl::StatusCode::kUnauthenticated);
  CHECK(rig.tpu.Requests().size() == 2);
  CHECK(rig.metadata.Stat("requests") == 4);  // project, zone, token, token again.
}

TEST_CASE("TPU api: Cancel aborts a reset waiting on a stuck node", "[tpu]") {
  ApiRig rig(/*timeout_seconds=*/60);
  rig.tpu.Control("stuck?node=tpu-1&state=STARTING");
  CancelToken cancel;
  auto reset = std::async(std::launch::async, [&] { return rig.control->Reset(rig.Call(&cancel)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  cancel.Cancel();
  REQUIRE(reset.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(reset.get().code() == absl::StatusCode::kCancelled);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}

// Answers metadata requests (token, project, zone) itself and TPU requests
// from a script; records the TPU requests.
class ScriptedHttp final : public HttpClient {
 public:
  std::deque<int> statuses;       // TPU responses to give, in order; then 200.
  bool post_unreachable = false;  // POSTs fail in transit (Unavailable).
  int metadata_503s = 0;          // The next N metadata requests answer 503.
  std::vector<std::string> tpu_requests;
  int token_fetches = 0;

  absl::StatusOr<HttpResponse> Get(const HttpRequest& r) override { return Send(r); }
  absl::StatusOr<HttpResponse> Send(const HttpRequest& r) override {
    if (r.url.find("/computeMetadata/") != std::string::npos) return Metadata(r.url);
    tpu_requests.push_back(r.method + " " + r.url);
    if (post_unreachable && r.method == "POST") return absl::UnavailableError("connection reset");
    const int status = statuses.empty() ? 200 : statuses.front();
    if (!statuses.empty()) statuses.pop_front();
    const std::string body = status == 200
                                 ? R"({"name":"n","state":"READY","health":"HEALTHY"})"
                                 : R"({"error":{"code":503,"message":"busy","status":"UNAVAILABLE"}})";
    return HttpResponse{status, body, {}};
  }

 private:
  absl::StatusOr<HttpResponse> Metadata(const std::string& url) {
    HttpResponse r{200, "", {{"metadata-flavor", "Google"}}};
    if (metadata_503s > 0) {
      --metadata_503s;
      return HttpResponse{503, "", {{"metadata-flavor", "Google"}}};
    }
    if (url.find("token") != std::string::npos) {
      ++token_fetches;
      r.body = R"({"access_token":"t","expires_in":3599,"token_type":"Bearer"})";
    } else {
      r.body = url.find("zone") != std::string::npos ? "projects/1/zones/z" : "p";
    }
    return r;
  }
};

struct FakeRig {
  std::shared_ptr<ScriptedHttp> http = std::make_shared<ScriptedHttp>();
  std::shared_ptr<testing::FakeWaitClock> clock = std::make_shared<testing::FakeWaitClock>();
  std::unique_ptr<TpuControl> control;

  explicit FakeRig(int max_attempts = 5) {
    TpuConfig config;
    config.backend = "api";
    config.name = "n";
    config.api_endpoint = "https://tpu.example";
    config.max_attempts = max_attempts;
    TpuDeps deps{http, std::make_shared<MetadataClient>("http://md/computeMetadata/v1/", http), clock};
    control = *MakeTpuControl(config, deps);
  }
};

TEST_CASE("TPU api: retries back off 1, 2, 4 s (simulated) against the documented URL", "[tpu]") {
  FakeRig rig;
  rig.http->statuses = {503, 429, 502};
  REQUIRE(rig.control->Describe(nullptr).ok());
  CHECK(rig.clock->sleeps() == std::vector<double>{1, 2, 4});
  REQUIRE(rig.http->tpu_requests.size() == 4);
  CHECK(rig.http->tpu_requests[0] == "GET https://tpu.example/v2/projects/p/locations/z/nodes/n");
}

TEST_CASE("TPU api: a POST lost in transit is not resent", "[tpu]") {
  FakeRig rig;
  REQUIRE(rig.control->Describe(nullptr).ok());  // Resolves the target first.
  rig.http->post_unreachable = true;
  rig.http->tpu_requests.clear();
  absl::Status reset = rig.control->Reset({});
  CHECK(reset.code() == absl::StatusCode::kUnavailable);
  CHECK(rig.http->tpu_requests.size() == 2);  // GET node, one POST :stop.
}

TEST_CASE("TPU api: a token refresh that meets metadata 503s is retried", "[tpu]") {
  FakeRig rig;
  REQUIRE(rig.control->Describe(nullptr).ok());
  rig.clock->AdvanceSeconds(4000);  // The token expired.
  rig.http->metadata_503s = 2;      // Host maintenance: 503 for a moment (reference §3).
  CHECK(rig.control->Describe(nullptr).ok());
  CHECK(rig.http->token_fetches == 2);
}

TEST_CASE("TPU api: the token is cached until 60 s before it expires", "[tpu]") {
  FakeRig rig;
  REQUIRE(rig.control->Describe(nullptr).ok());
  rig.clock->AdvanceSeconds(3500);  // expires_in 3599: still fresh.
  REQUIRE(rig.control->Describe(nullptr).ok());
  CHECK(rig.http->token_fetches == 1);
  rig.clock->AdvanceSeconds(40);  // 3540 > 3599 - 60.
  REQUIRE(rig.control->Describe(nullptr).ok());
  CHECK(rig.http->token_fetches == 2);
}

TEST_CASE("HttpClient: the default Send forwards GET to Get and refuses POST", "[tpu]") {
  struct GetOnly final : public HttpClient {
    absl::StatusOr<HttpResponse> Get(const HttpRequest&) override { return HttpResponse{204, "", {}}; }
  } client;
  HttpRequest request;
  request.url = "http://example.invalid/";
  CHECK(client.Send(request)->status == 204);
  request.method = "POST";
  CHECK(client.Send(request).status().code() == absl::StatusCode::kUnimplemented);
  request.method = "PUT";
  CHECK(client.Send(request).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(NewCurlHttpClient()->Send(request).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("TPU config: MakeTpuControl validates and names the key", "[tpu]") {
  TpuConfig config;
  CHECK(MakeTpuControl(config).ok());
  CHECK(*MakeTpuControl(config) == nullptr);  // backend none.
  config.backend = "magic";
  CHECK_THAT(std::string(MakeTpuControl(config).status().message()),
             Catch::StartsWith("tpu.backend: must be one of"));
  config.backend = "api";
  config.timeout_seconds = -1;
  CHECK(MakeTpuControl(config).status().message() == "tpu.timeout_seconds: must be > 0, got -1");
}

}  // namespace
}  // namespace tpud
