#include "daemon/gce/metadata_client.h"

#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string QueryEscape(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

// The first 200 bytes of a body, trimmed, for error messages.
std::string Excerpt(const std::string& body) {
  std::string text(absl::StripAsciiWhitespace(absl::string_view(body).substr(0, 200)));
  return text.empty() ? "" : ": " + text;
}

absl::Status StatusFromHttp(const HttpResponse& r, const std::string& context) {
  const std::string message = absl::StrCat(context, ": HTTP ", r.status, Excerpt(r.body));
  switch (r.status) {
    case 200:
      return absl::OkStatus();
    case 400:
      return absl::InvalidArgumentError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return absl::UnavailableError(message);
    default:
      return absl::UnknownError(message);
  }
}

bool FromMetadataServer(const HttpResponse& r) {
  std::optional<std::string> flavor = r.Header("Metadata-Flavor");
  return flavor && *flavor == "Google";
}

}  // namespace

std::string MetadataBaseUrl(std::string_view host_override) {
  std::string host(host_override);
  if (host.empty()) host = Env("GCE_METADATA_HOST");
  if (host.empty()) host = Env("GCE_METADATA_IP");
  if (host.empty()) host = kDefaultMetadataHost;
  return absl::StrCat("http://", host, "/computeMetadata/v1/");
}

MetadataClient::MetadataClient(std::string base_url, std::shared_ptr<HttpClient> http,
                               MetadataClientOptions options)
    : base_url_(std::move(base_url)), http_(std::move(http)), options_(options) {
  if (!http_) http_ = NewCurlHttpClient();
}

absl::StatusOr<MetadataValue> MetadataClient::Fetch(std::string_view path, const std::string& query,
                                                    std::chrono::milliseconds timeout,
                                                    HttpCancel* cancel) const {
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  const std::string context = absl::StrCat("metadata \"", std::string(path), "\"");
  HttpRequest request;
  request.url = absl::StrCat(base_url_, std::string(path), query);
  request.headers = {{"Metadata-Flavor", "Google"}};
  request.timeout = timeout;
  request.cancel = cancel;
  absl::StatusOr<HttpResponse> response = http_->Get(request);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat(context, ": ", std::string(response.status().message())));
  }
  if (!FromMetadataServer(*response)) {
    return absl::UnavailableError(
        absl::StrCat(context, ": HTTP ", response->status,
                     " without \"Metadata-Flavor: Google\"; not the metadata server"));
  }
  if (absl::Status s = StatusFromHttp(*response, context); !s.ok()) return s;
  return MetadataValue{std::move(response->body), response->Header("ETag").value_or("")};
}

absl::StatusOr<MetadataValue> MetadataClient::Get(std::string_view path, HttpCancel* cancel) const {
  return Fetch(path, "", options_.get_timeout, cancel);
}

absl::StatusOr<MetadataValue> MetadataClient::WaitForChange(std::string_view path, std::string_view last_etag,
                                                            int timeout_sec, HttpCancel* cancel) const {
  if (timeout_sec < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata wait_for_change: timeout_sec must be >= 1, got ", timeout_sec));
  }
  const char separator = path.find('?') == std::string_view::npos ? '?' : '&';
  std::string query = absl::StrCat(std::string(1, separator), "wait_for_change=true");
  if (!last_etag.empty()) absl::StrAppend(&query, "&last_etag=", QueryEscape(last_etag));
  absl::StrAppend(&query, "&timeout_sec=", timeout_sec);
  const auto timeout = std::chrono::seconds(timeout_sec) + options_.long_poll_slack;
  return Fetch(path, query, std::chrono::duration_cast<std::chrono::milliseconds>(timeout), cancel);
}

absl::Status MetadataClient::Probe() const { return Fetch("", "", options_.probe_timeout, nullptr).status(); }

}  // namespace tpud
