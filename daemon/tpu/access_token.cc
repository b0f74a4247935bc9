#include "daemon/tpu/access_token.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tpud {

AccessTokenSource::AccessTokenSource(std::shared_ptr<const MetadataClient> metadata,
                                     std::shared_ptr<WaitClock> clock, Seconds refresh_margin)
    : metadata_(std::move(metadata)), clock_(std::move(clock)), refresh_margin_(refresh_margin) {}

absl::StatusOr<std::string> AccessTokenSource::Token(CancelToken* cancel) {
  absl::MutexLock lock(&mu_);
  const SteadyTime now = clock_->Now();
  if (!token_.empty() && now < refresh_at_) return token_;
  absl::StatusOr<MetadataValue> answer = metadata_->Get(kDefaultTokenKey, cancel);
  if (!answer.ok()) return answer.status();
  const nlohmann::json token = nlohmann::json::parse(answer->value, nullptr, /*allow_exceptions=*/false);
  if (!token.is_object() || !token.contains("access_token") || !token["access_token"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata \"", kDefaultTokenKey, "\": no access_token in the answer"));
  }
  const nlohmann::json& expires = token.contains("expires_in") ? token["expires_in"] : nlohmann::json();
  const double expires_in =
      expires.is_number() ? expires.get<double>() : 0.0;  // Seconds; 0: refetch next time.
  token_ = token["access_token"].get<std::string>();
  refresh_at_ = now + Deadline::ToDuration(Seconds(expires_in) - refresh_margin_);
  return token_;
}

void AccessTokenSource::Invalidate() {
  absl::MutexLock lock(&mu_);
  token_.clear();
}

}  // namespace tpud
