#include "daemon/tpu/tpu_api_client.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

using nlohmann::json;

std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// The Google API error model: {"error": {"code": 403, "message": "...", "status": "PERMISSION_DENIED"}}.
struct ApiError {
  std::string message;  // The API's words, or the start of a non-JSON body.
  std::string status;   // e.g. "FAILED_PRECONDITION"; may be empty.
};

ApiError ParseApiError(const std::string& body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object()) {
    return ApiError{StringField(parsed["error"], "message"), StringField(parsed["error"], "status")};
  }
  return ApiError{std::string(absl::StripAsciiWhitespace(absl::string_view(body).substr(0, 200))), ""};
}

// The absl code whose canonical name is `name` ("NOT_FOUND"), else `fallback`.
absl::StatusCode CodeNamed(const std::string& name, absl::StatusCode fallback) {
  for (int code = 1; code <= 16; ++code) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(code)) == name) {
      return static_cast<absl::StatusCode>(code);
    }
  }
  return fallback;
}

absl::Status StatusFromResponse(const HttpResponse& r, const std::string& method,
                                const std::string& subject) {
  const ApiError error = ParseApiError(r.body);
  switch (r.status) {
    case 401:
      return absl::UnauthenticatedError(
          absl::StrCat(method, " ", subject,
                       ": the metadata server's access token was rejected (HTTP 401): ", error.message));
    case 403:
      return absl::PermissionDeniedError(absl::StrCat("permission denied on ", subject, ": ", error.message));
    case 404:
      return absl::NotFoundError(absl::StrCat(subject, " not found: ", error.message));
    default:
      break;
  }
  const absl::StatusCode fallback =
      r.status == 400 ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kUnknown;
  return absl::Status(CodeNamed(error.status, fallback),
                      absl::StrCat(method, " ", subject, ": HTTP ", r.status,
                                   error.status.empty() ? "" : " " + error.status, ": ", error.message));
}

bool RetryableStatus(int http_status) {
  return http_status == 429 || (http_status >= 500 && http_status <= 599);
}

bool RetryableError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded;
}

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", std::string(s.message())));
}

}  // namespace

absl::StatusOr<TpuOperation> ParseOperationJson(const std::string& text) {
  const json op = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!op.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tpu operation: not a JSON object: ", text.substr(0, 200)));
  }
  TpuOperation out;
  out.name = StringField(op, "name");
  out.done = op.contains("done") && op["done"].is_boolean() && op["done"].get<bool>();
  if (op.contains("metadata") && op["metadata"].is_object()) {
    out.verb = StringField(op["metadata"], "verb");
    out.status_detail = StringField(op["metadata"], "statusDetail");
  }
  if (op.contains("error") && op["error"].is_object()) {
    const json& error = op["error"];
    const int code =
        error.contains("code") && error["code"].is_number_integer() ? error["code"].get<int>() : 2;
    const bool known = code >= 1 && code <= 16;
    const std::string message = StringField(error, "message");
    out.error = absl::Status(known ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
                             absl::StrCat(message.empty() ? "(no message)" : message, " (code ", code, ")"));
  }
  return out;
}

TpuApiClient::TpuApiClient(TpuApiOptions options, std::shared_ptr<HttpClient> http,
                           std::shared_ptr<AccessTokenSource> tokens, std::shared_ptr<WaitClock> clock)
    : options_(std::move(options)),
      http_(std::move(http)),
      tokens_(std::move(tokens)),
      clock_(std::move(clock)) {}

absl::StatusOr<TpuNode> TpuApiClient::GetNode(const TpuTarget& target, const Deadline& deadline,
                                              CancelToken* cancel) {
  const std::string name = target.ResourceName();
  absl::StatusOr<std::string> body = Perform({"GET", name, "node " + name}, deadline, cancel);
  if (!body.ok()) return body.status();
  return ParseNodeJson(*body);
}

absl::StatusOr<TpuOperation> TpuApiClient::PostVerb(const TpuTarget& target, NodeVerb verb,
                                                    const Deadline& deadline, CancelToken* cancel) {
  const std::string name = target.ResourceName();
  absl::StatusOr<std::string> body =
      Perform({"POST", absl::StrCat(name, ":", NodeVerbName(verb)), "node " + name}, deadline, cancel);
  if (!body.ok()) return body.status();
  return ParseOperationJson(*body);
}

absl::StatusOr<TpuOperation> TpuApiClient::ResetQueuedResource(const std::string& queued_resource,
                                                               const Deadline& deadline, CancelToken* cancel) {
  absl::StatusOr<std::string> body =
      Perform({"POST", absl::StrCat(queued_resource, ":reset"), "queued resource " + queued_resource}, deadline,
              cancel);
  if (!body.ok()) return body.status();
  return ParseOperationJson(*body);
}

absl::StatusOr<std::string> TpuApiClient::GetQueuedResourceState(const std::string& queued_resource,
                                                                 const Deadline& deadline, CancelToken* cancel) {
  absl::StatusOr<std::string> body =
      Perform({"GET", queued_resource, "queued resource " + queued_resource}, deadline, cancel);
  if (!body.ok()) return body.status();
  const nlohmann::json json = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("state") || !json["state"].is_object() ||
      !json["state"].contains("state") || !json["state"]["state"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("queued resource ", queued_resource, ": no state.state in the answer"));
  }
  return json["state"]["state"].get<std::string>();
}

absl::StatusOr<TpuOperation> TpuApiClient::GetOperation(const std::string& name, const Deadline& deadline,
                                                        CancelToken* cancel) {
  absl::StatusOr<std::string> body = Perform({"GET", name, "operation " + name}, deadline, cancel);
  if (!body.ok()) return body.status();
  return ParseOperationJson(*body);
}

absl::StatusOr<std::string> TpuApiClient::Perform(const Call& call, const Deadline& deadline,
                                                  CancelToken* cancel) {
  Seconds delay = options_.retry_initial;
  for (int attempt = 1;; ++attempt) {
    bool retryable = false;
    absl::StatusOr<std::string> body = Attempt(call, deadline, cancel, retryable);
    if (body.ok() || !retryable) return body;
    const auto pause = Deadline::ToDuration(delay);
    if (attempt >= options_.max_attempts || deadline.Remaining() <= pause) {
      return absl::Status(
          body.status().code() == absl::StatusCode::kDeadlineExceeded ? absl::StatusCode::kDeadlineExceeded
                                                                      : absl::StatusCode::kUnavailable,
          absl::StrCat("gave up after ", attempt, " attempt(s): ", std::string(body.status().message())));
    }
    if (absl::Status s = clock_->Sleep(pause, cancel); !s.ok()) return WithContext(s, call.subject);
    delay = std::min(delay * 2, options_.retry_max);
  }
}

// One try (two when a 401 asks for a fresh token). `retryable` says whether
// a failure is worth another try.
absl::StatusOr<std::string> TpuApiClient::Attempt(const Call& call, const Deadline& deadline,
                                                  CancelToken* cancel, bool& retryable) {
  bool sent = false;
  absl::StatusOr<HttpResponse> response = Send(call, deadline, cancel, sent);
  if (response.ok() && response->status == 401) {
    tokens_->Invalidate();
    response = Send(call, deadline, cancel, sent);
  }
  if (!response.ok()) {
    // A POST that failed in transit may have reached the server: never resend it.
    retryable = (call.method == "GET" || !sent) && RetryableError(response.status()) && !deadline.Expired();
    return response.status();
  }
  if (response->status == 200) return std::move(response->body);
  retryable = RetryableStatus(response->status);
  return StatusFromResponse(*response, call.method, call.subject);
}

absl::StatusOr<HttpResponse> TpuApiClient::Send(const Call& call, const Deadline& deadline,
                                                CancelToken* cancel, bool& sent) {
  sent = false;
  const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Remaining());
  if (deadline.Expired()) {
    return absl::DeadlineExceededError(absl::StrCat(call.method, " ", call.subject, ": out of time"));
  }
  absl::StatusOr<std::string> token = tokens_->Token(cancel);
  if (!token.ok()) {
    return WithContext(token.status(), absl::StrCat(call.method, " ", call.subject, ": access token"));
  }
  HttpRequest request;
  request.url = absl::StrCat(options_.endpoint, "/v2/", call.path);
  request.method = call.method;
  if (call.method == "POST") {
    request.body = "{}";  // stop/start take an empty request message.
    request.content_type = "application/json";
  }
  request.headers = {{"Authorization", "Bearer " + *token}, {"Accept", "application/json"}};
  request.timeout = std::min(options_.request_timeout, remaining);
  request.use_proxy_env = true;
  request.cancel = cancel;
  sent = true;
  return http_->Send(request);
}

std::string OperationShortName(const std::string& name) { return name.substr(name.rfind('/') + 1); }

absl::Status AwaitTpuOperation(TpuApiClient& api, TpuOperation op, const std::string& verb,
                               std::chrono::nanoseconds poll, const Deadline& deadline, const TpuCall& call) {
  const std::string what = absl::StrCat(verb, " operation ", op.name);
  auto not_done = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " not done after ", FormatSeconds(deadline.Elapsed()),
                     op.status_detail.empty() ? "" : " (status: " + op.status_detail + ")"));
  };
  while (!op.done) {
    if (deadline.Expired()) return not_done();
    if (absl::Status s = deadline.SleepAtMost(poll, call.cancel); !s.ok()) return s;
    absl::StatusOr<TpuOperation> polled = api.GetOperation(op.name, deadline, call.cancel);
    if (!polled.ok()) {
      const bool out_of_time = polled.status().code() == absl::StatusCode::kDeadlineExceeded && deadline.Expired();
      return out_of_time ? not_done() : polled.status();
    }
    op = *std::move(polled);
  }
  if (!op.error.ok()) {
    call.Report(absl::StrCat("operation ", OperationShortName(op.name), " failed: ", std::string(op.error.message())));
    return absl::Status(op.error.code(), absl::StrCat(what, " failed: ", std::string(op.error.message())));
  }
  call.Report(absl::StrCat("operation ", OperationShortName(op.name), " done"));
  return absl::OkStatus();
}

TpuApiOptions TpuApiOptionsFor(const TpuConfig& config) {
  TpuApiOptions options;
  options.endpoint = config.api_endpoint;
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  options.request_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(Seconds(config.request_timeout_seconds));
  options.max_attempts = config.max_attempts;
  options.retry_initial = Seconds(config.retry_initial_seconds);
  options.retry_max = Seconds(config.retry_max_seconds);
  return options;
}

}  // namespace tpud
