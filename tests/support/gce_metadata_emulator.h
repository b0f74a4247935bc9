// Runs tests/support/gce_metadata_emulator.py as a child process for a test.
// Needs TPUD_SOURCE_DIR (the repo root) defined by the build.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/gce/http_client.h"
#include "tests/support/fixture_process.h"

namespace tpud::testing {

// Thread-safety: one owner; Control/Stats may be called from any thread.
class MetadataEmulator {
 public:
  // Starts the emulator and waits (up to 10 s) for its `PORT <n>` line.
  // Throws std::runtime_error on failure. `args` go to the script (e.g. --set K=V).
  explicit MetadataEmulator(const std::vector<std::string>& args = {})
      : process_("tests/support/gce_metadata_emulator.py", args), http_(NewCurlHttpClient()) {}

  int port() const { return process_.port(); }
  // The emulator's process id (a child of this process).
  pid_t pid() const { return process_.pid(); }
  std::string host() const { return process_.host(); }
  std::string base_url() const { return "http://" + host() + "/computeMetadata/v1/"; }

  // GETs /_emulator/<request> (e.g. "set?key=K&value=V"); returns the body.
  std::string Control(const std::string& request) const {
    HttpRequest r;
    r.url = "http://" + host() + "/_emulator/" + request;
    absl::StatusOr<HttpResponse> response = http_->Get(r);
    if (!response.ok() || response->status != 200) throw std::runtime_error("emulator control " + request);
    return response->body;
  }
  // A counter from /_emulator/stats: "requests", "served_503" or "waiting".
  int Stat(const std::string& name) const {
    const std::string body = Control("stats");
    const std::size_t at = body.find("\"" + name + "\": ");
    if (at == std::string::npos) throw std::runtime_error("emulator stats lack " + name);
    return std::stoi(body.substr(at + name.size() + 4));
  }
  // Waits (polling every 10 ms, up to `limit`) until at least `n` long polls are
  // blocked in the emulator; false on timeout.
  bool WaitForWaiters(int n, std::chrono::milliseconds limit = std::chrono::seconds(10)) const {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (Stat("waiting") < n) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

 private:
  FixtureProcess process_;
  std::shared_ptr<HttpClient> http_;
};

}  // namespace tpud::testing
