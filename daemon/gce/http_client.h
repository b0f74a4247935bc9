// A minimal HTTP interface (GET, and POST with a body), so Google Cloud
// clients can be tested against emulators and fakes. The real implementation
// is libcurl (curl_http_client.cc, the only file that includes curl).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"

namespace tpud {

// Lets one thread abort requests another thread has in flight. Once cancelled
// it stays cancelled: requests using it fail with Cancelled at once.
// Thread-safety: all methods are safe from any thread.
class HttpCancel {
 public:
  // Cancels current and later requests that use this token; idempotent.
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

  // For HttpClient implementations: `wake` must unblock a request waiting on
  // I/O (it is called under a lock, from Cancel's thread, and must be quick).
  // Returns an id for RemoveWaker. If already cancelled, `wake` is not kept
  // and 0 is returned: the caller should not start the request.
  std::uint64_t AddWaker(std::function<void()> wake);
  // After it returns, the waker is never called again. A no-op for 0.
  void RemoveWaker(std::uint64_t id);

 private:
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::uint64_t, std::function<void()>> wakers_ ABSL_GUARDED_BY(mu_);
};

struct HttpRequest {
  std::string url;
  // Read by Send ("GET" or "POST"); Get ignores it and always GETs.
  std::string method = "GET";
  std::string body;          // Sent by a POST (may be empty); ignored by GET.
  std::string content_type;  // Sent as "Content-Type" with a POST body; empty: none.
  std::vector<std::pair<std::string, std::string>> headers;  // Sent as "Name: value".
  std::chrono::milliseconds timeout{5000};                   // The whole request, connect included.
  std::size_t max_body_bytes = 1 << 20;                      // Larger bodies fail: ResourceExhausted.
  bool use_proxy_env = false;    // Honour http_proxy/no_proxy; off: always connect directly.
  HttpCancel* cancel = nullptr;  // Optional, not owned; must outlive the call.
};

struct HttpResponse {
  int status = 0;  // The HTTP status code, e.g. 200, 503.
  std::string body;
  // Response headers of the final response, in order, names lowercased,
  // values trimmed of surrounding whitespace.
  std::vector<std::pair<std::string, std::string>> headers;

  // The first header named `name` (case-insensitive), if any.
  std::optional<std::string> Header(std::string_view name) const;
};

// Thread-safety: implementations allow concurrent Get/Send calls from any threads.
class HttpClient {
 public:
  virtual ~HttpClient() = default;

  // Performs a GET; never follows redirects. An HTTP error status is a
  // response, not an error. Errors (the message names the URL):
  //   DeadlineExceeded  `timeout` passed;
  //   Unavailable       cannot resolve or connect, or the connection broke;
  //   Cancelled         `cancel` was cancelled before or during the request;
  //   ResourceExhausted the body exceeded max_body_bytes;
  //   InvalidArgument   a malformed URL; Internal otherwise.
  virtual absl::StatusOr<HttpResponse> Get(const HttpRequest& request) = 0;

  // Performs `request.method` with `request.body`; errors as Get, messages
  // naming the method and URL. InvalidArgument for a method other than GET or
  // POST. This default forwards GET to Get and answers Unimplemented for POST,
  // so clients and fakes written before Send keep compiling and working.
  virtual absl::StatusOr<HttpResponse> Send(const HttpRequest& request);
};

// The libcurl client. Creating it initialises libcurl once per process.
std::shared_ptr<HttpClient> NewCurlHttpClient();

}  // namespace tpud
