// OAuth2 access tokens for Google APIs, from the metadata server's default
// service account (`instance/service-accounts/default/token`, which answers
// {"access_token","expires_in","token_type":"Bearer"}; reference §3). The token
// must carry the scope https://www.googleapis.com/auth/cloud-platform (§1),
// which the TPU VM's service account has by default.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "daemon/gce/metadata_client.h"
#include "daemon/tpu/wait_clock.h"

namespace tpud {

inline constexpr char kDefaultTokenKey[] = "instance/service-accounts/default/token";

// Caches the token until `refresh_margin` before it expires.
// Thread-safety: safe from any thread; one fetch at a time (others wait for it).
class AccessTokenSource {
 public:
  AccessTokenSource(std::shared_ptr<const MetadataClient> metadata, std::shared_ptr<WaitClock> clock,
                    Seconds refresh_margin = Seconds(60));

  // The cached token, or a fresh one. Errors: the metadata client's (naming
  // the token key), InvalidArgument when the answer lacks access_token.
  absl::StatusOr<std::string> Token(CancelToken* cancel);
  // Drops the cached token (after the API answered 401).
  void Invalidate();

 private:
  const std::shared_ptr<const MetadataClient> metadata_;
  const std::shared_ptr<WaitClock> clock_;
  const Seconds refresh_margin_;
  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);  // Empty: none cached.
  SteadyTime refresh_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tpud
