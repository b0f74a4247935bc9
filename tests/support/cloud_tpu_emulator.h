// Runs tests/support/cloud_tpu_emulator.py for a test and talks to its
// /_emulator/ control endpoints.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/gce/http_client.h"
#include "tests/support/fixture_process.h"

namespace tpud::testing {

// Thread-safety: one owner; Control/Requests may be called from any thread.
class CloudTpuEmulator {
 public:
  // `args` go to the script (e.g. "--op-delay", "0.1").
  explicit CloudTpuEmulator(const std::vector<std::string>& args = {})
      : process_("tests/support/cloud_tpu_emulator.py", args), http_(NewCurlHttpClient()) {}

  std::string endpoint() const { return "http://" + process_.host(); }
  // The emulator's process id (a child of this process).
  pid_t pid() const { return process_.pid(); }

  // GETs /_emulator/<request> (e.g. "fault?node=tpu-1&status=403"); the body.
  std::string Control(const std::string& request) const {
    HttpRequest r;
    r.url = endpoint() + "/_emulator/" + request;
    absl::StatusOr<HttpResponse> response = http_->Get(r);
    if (!response.ok() || response->status != 200) throw std::runtime_error("emulator control " + request);
    return response->body;
  }
  // The API requests so far as "METHOD /path STATUS", in order.
  std::vector<std::string> Requests() const {
    std::vector<std::string> out;
    const nlohmann::json log = nlohmann::json::parse(Control("requests"));
    for (const auto& r : log["requests"]) {
      out.push_back(r["method"].get<std::string>() + " " + r["path"].get<std::string>() + " " +
                    std::to_string(r["status"].get<int>()));
    }
    return out;
  }
  // The node's fields as the emulator holds them now.
  nlohmann::json Node(const std::string& node) const {
    return nlohmann::json::parse(Control("node?node=" + node));
  }

 private:
  FixtureProcess process_;
  std::shared_ptr<HttpClient> http_;
};

}  // namespace tpud::testing
