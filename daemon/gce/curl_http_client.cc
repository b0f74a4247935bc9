// The libcurl adapter: the only file that includes curl. Each request runs its own
// easy handle inside its own multi handle, so a request blocked in I/O can be
// woken at once by curl_multi_wakeup when its HttpCancel fires.
#include <curl/curl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/gce/http_client.h"

namespace tpud {
namespace {

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* h) const { curl_multi_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;
using Multi = std::unique_ptr<CURLM, MultiDeleter>;
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// What the callbacks fill in while a request runs.
struct Transfer {
  HttpResponse response;
  std::size_t max_body_bytes = 0;
  bool body_too_large = false;
  char error[CURL_ERROR_SIZE] = {0};
};

std::size_t OnBody(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * count;
  if (t->response.body.size() + bytes > t->max_body_bytes) {
    t->body_too_large = true;
    return 0;  // Makes curl fail with CURLE_WRITE_ERROR.
  }
  t->response.body.append(data, bytes);
  return bytes;
}

std::size_t OnHeader(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * count;
  absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    t->response.headers.clear();  // A new response (after 100 Continue): keep the last only.
    return bytes;
  }
  const std::size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return bytes;
  std::string name(absl::StripAsciiWhitespace(line.substr(0, colon)));
  absl::AsciiStrToLower(&name);
  t->response.headers.emplace_back(std::move(name),
                                   std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  return bytes;
}

// `what` names the request: "GET http://...".
absl::Status CurlError(CURLcode code, const Transfer& t, const std::string& what) {
  const std::string detail = t.error[0] != '\0' ? t.error : curl_easy_strerror(code);
  const std::string message = absl::StrCat(what, ": ", detail);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(message);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return absl::UnavailableError(message);
    case CURLE_WRITE_ERROR:
      if (t.body_too_large) {
        return absl::ResourceExhaustedError(
            absl::StrCat(what, ": body larger than ", t.max_body_bytes, " bytes"));
      }
      return absl::InternalError(message);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status Configure(CURL* easy, const HttpRequest& request, bool post, curl_slist* headers,
                       Transfer& t) {
  CURLcode rc = CURLE_OK;
  auto set = [&](CURLoption option, auto value) {
    if (rc == CURLE_OK) rc = curl_easy_setopt(easy, option, value);
  };
  set(CURLOPT_URL, request.url.c_str());
  if (post) {
    set(CURLOPT_POST, 1L);
    set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    set(CURLOPT_POSTFIELDS, request.body.c_str());  // Not copied: `request` outlives the transfer.
  } else {
    set(CURLOPT_HTTPGET, 1L);
  }
  set(CURLOPT_HTTPHEADER, headers);
  set(CURLOPT_WRITEFUNCTION, &OnBody);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&t));
  set(CURLOPT_HEADERFUNCTION, &OnHeader);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&t));
  set(CURLOPT_ERRORBUFFER, t.error);
  set(CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<std::int64_t>(1, request.timeout.count())));
  set(CURLOPT_NOSIGNAL, 1L);  // Required with threads.
  set(CURLOPT_FOLLOWLOCATION, 0L);
  if (!request.use_proxy_env) set(CURLOPT_PROXY, "");  // "" disables proxies, env included.
  if (rc == CURLE_OK) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(post ? "POST " : "GET ", request.url,
                                         ": curl setup: ", curl_easy_strerror(rc)));
}

// Drives the transfer until it finishes or `cancel` fires; returns its result.
absl::StatusOr<CURLcode> Drive(CURLM* multi, const HttpCancel* cancel) {
  int running = 1;
  while (running > 0) {
    if (cancel != nullptr && cancel->cancelled()) return absl::CancelledError("request cancelled");
    if (CURLMcode mc = curl_multi_perform(multi, &running); mc != CURLM_OK) {
      return absl::InternalError(absl::StrCat("curl_multi_perform: ", curl_multi_strerror(mc)));
    }
    if (running > 0) curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
    if (msg->msg == CURLMSG_DONE) return msg->data.result;
  }
  return absl::InternalError("curl finished without a result");
}

// Registers a curl_multi_wakeup for `multi` with the request's cancel token.
class WakerRegistration {
 public:
  WakerRegistration(HttpCancel* cancel, CURLM* multi) : cancel_(cancel) {
    if (cancel_ != nullptr) id_ = cancel_->AddWaker([multi] { curl_multi_wakeup(multi); });
  }
  ~WakerRegistration() {
    if (cancel_ != nullptr) cancel_->RemoveWaker(id_);
  }
  WakerRegistration(const WakerRegistration&) = delete;
  WakerRegistration& operator=(const WakerRegistration&) = delete;

 private:
  HttpCancel* cancel_;
  std::uint64_t id_ = 0;
};

absl::StatusOr<Slist> BuildHeaders(const HttpRequest& request, bool post) {
  std::vector<std::string> lines;
  for (const auto& [name, value] : request.headers) lines.push_back(absl::StrCat(name, ": ", value));
  if (post && !request.content_type.empty()) lines.push_back("Content-Type: " + request.content_type);
  if (post) lines.push_back("Expect:");  // No "100-continue" round trip before the body.
  Slist headers;
  for (const std::string& line : lines) {
    curl_slist* grown = curl_slist_append(headers.get(), line.c_str());
    if (grown == nullptr) return absl::ResourceExhaustedError(request.url + ": out of memory");
    headers.release();  // `grown` is the same list, extended.
    headers.reset(grown);
  }
  return headers;
}

class CurlHttpClient final : public HttpClient {
 public:
  absl::StatusOr<HttpResponse> Get(const HttpRequest& request) override { return Perform(request, false); }
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override;

 private:
  absl::StatusOr<HttpResponse> Perform(const HttpRequest& request, bool post);
};

absl::StatusOr<HttpResponse> CurlHttpClient::Send(const HttpRequest& request) {
  if (request.method != "GET" && request.method != "POST") {
    return absl::InvalidArgumentError(
        absl::StrCat(request.method, " ", request.url, ": unsupported HTTP method"));
  }
  return Perform(request, request.method == "POST");
}

absl::StatusOr<HttpResponse> CurlHttpClient::Perform(const HttpRequest& request, bool post) {
  const std::string what = absl::StrCat(post ? "POST " : "GET ", request.url);
  if (request.cancel != nullptr && request.cancel->cancelled()) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  Easy easy(curl_easy_init());
  Multi multi(curl_multi_init());
  if (!easy || !multi) return absl::ResourceExhaustedError(what + ": curl init failed");
  absl::StatusOr<Slist> headers = BuildHeaders(request, post);
  if (!headers.ok()) return headers.status();
  Transfer t;
  t.max_body_bytes = request.max_body_bytes;
  if (absl::Status s = Configure(easy.get(), request, post, headers->get(), t); !s.ok()) return s;
  curl_multi_add_handle(multi.get(), easy.get());
  absl::StatusOr<CURLcode> result;
  {
    WakerRegistration waker(request.cancel, multi.get());  // Removed before multi is freed.
    result = Drive(multi.get(), request.cancel);
  }
  curl_multi_remove_handle(multi.get(), easy.get());
  if (!result.ok())
    return absl::Status(result.status().code(), what + ": " + std::string(result.status().message()));
  if (*result != CURLE_OK) return CurlError(*result, t, what);
  long status = 0;
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &status);
  t.response.status = static_cast<int>(status);
  return std::move(t.response);
}

}  // namespace

std::shared_ptr<HttpClient> NewCurlHttpClient() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::make_shared<CurlHttpClient>();
}

}  // namespace tpud
