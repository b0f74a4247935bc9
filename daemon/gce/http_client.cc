#include "daemon/gce/http_client.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tpud {

void HttpCancel::Cancel() {
  cancelled_.store(true);
  absl::MutexLock lock(&mu_);
  for (auto& [id, wake] : wakers_) wake();
}

std::uint64_t HttpCancel::AddWaker(std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  if (cancelled_.load()) return 0;
  const std::uint64_t id = next_id_++;
  wakers_.emplace(id, std::move(wake));
  return id;
}

void HttpCancel::RemoveWaker(std::uint64_t id) {
  if (id == 0) return;
  absl::MutexLock lock(&mu_);
  wakers_.erase(id);
}

std::optional<std::string> HttpResponse::Header(std::string_view name) const {
  const absl::string_view wanted(name.data(), name.size());
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, wanted)) return value;
  }
  return std::nullopt;
}

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& request) {
  if (request.method == "GET") return Get(request);
  if (request.method == "POST") {
    return absl::UnimplementedError(absl::StrCat("POST ", request.url, ": this HTTP client only does GET"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(request.method, " ", request.url, ": unsupported HTTP method"));
}

}  // namespace tpud
