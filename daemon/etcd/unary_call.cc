#include "daemon/etcd/unary_call.h"

#include <algorithm>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/etcd/stream_call.h"

namespace tpud::etcd {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{25};
constexpr std::chrono::milliseconds kMaxBackoff{400};

// The result of one attempt, and whether another may follow.
struct Outcome {
  absl::Status status;
  bool retry = false;
};

std::string Message(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline exceeded";
    case grpc::StatusCode::CANCELLED:
      return "cancelled";
    default:
      return status.error_message().empty() ? "failed" : status.error_message();
  }
}

// One attempt at member `index`, given until `attempt_deadline` (<= `deadline`, the call's).
Outcome TryOnce(EndpointPool& pool, std::size_t index, absl::string_view op, Retry retry, Deadline attempt_deadline,
                Deadline deadline, const Attempt& attempt) {
  const EndpointPool::Member& member = pool.member(index);
  const Deadline dial = std::min(deadline, Clock::now() + pool.options().dial_timeout);
  if (!pool.WaitConnected(index, dial)) {
    return {absl::UnavailableError(absl::StrCat("etcd ", member.name, ": ", op, ": not connected")), true};
  }
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(attempt_deadline));
  context.AddMetadata(kRequireLeaderKey, kRequireLeaderValue);
  const grpc::Status status = attempt(member, &context);
  if (status.ok()) return {absl::OkStatus(), false};
  const bool not_applied = NotApplied(status);
  const bool unavailable = status.error_code() == grpc::StatusCode::UNAVAILABLE;
  const bool attempt_timed_out =
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && Clock::now() < deadline;
  const bool retry_it = not_applied || (retry == Retry::kIdempotent && (unavailable || attempt_timed_out));
  const bool unknown = retry == Retry::kOnce && !not_applied &&
                       (unavailable || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  return {ToStatus(status, member.name, op, unknown), retry_it};
}

absl::Status WithAttempts(const absl::Status& status, int attempts) {
  if (attempts < 2) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), " (after ", attempts, " attempts)"));
}

}  // namespace

bool NotApplied(const grpc::Status& status) {
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // etcd's refusal before proposing, and gRPC's "no transport to send on".
      return absl::StartsWith(message, "etcdserver: no leader") ||
             absl::StrContains(message, "failed to connect to all addresses");
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return absl::StartsWith(message, "etcdserver: too many requests");
    default:
      return false;
  }
}

absl::Status ToStatus(const grpc::Status& status, absl::string_view endpoint, absl::string_view op,
                      bool outcome_unknown) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("etcd ", endpoint, ": ", op, ": ", Message(status),
                                   outcome_unknown ? " (outcome unknown)" : ""));
}

absl::Status CallWithFailover(EndpointPool& pool, absl::string_view op, Retry retry, const Attempt& attempt) {
  const Deadline deadline = Clock::now() + pool.options().request_timeout;
  std::chrono::milliseconds backoff = kFirstBackoff;
  for (int attempts = 1;; ++attempts) {
    const std::size_t index = pool.current();
    // An idempotent attempt gets a third of the budget, so one stuck member (a
    // paused process, a follower whose leader just died) leaves time to ask
    // another. A write keeps the whole budget: it cannot be retried once sent.
    const Deadline attempt_deadline =
        retry == Retry::kIdempotent ? std::min(deadline, Clock::now() + pool.options().request_timeout / 3) : deadline;
    Outcome outcome = TryOnce(pool, index, op, retry, attempt_deadline, deadline, attempt);
    if (outcome.status.ok() || !outcome.retry) return WithAttempts(outcome.status, attempts);
    pool.FailedOver(index);
    if (attempts % static_cast<int>(pool.size()) == 0) {  // A full round failed: back off.
      if (Clock::now() + backoff >= deadline) return WithAttempts(outcome.status, attempts);
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    if (Clock::now() >= deadline) return WithAttempts(outcome.status, attempts);
  }
}

absl::Status CallMember(EndpointPool& pool, std::size_t index, absl::string_view op, const Attempt& attempt) {
  const Deadline deadline = Clock::now() + pool.options().request_timeout;
  return TryOnce(pool, index, op, Retry::kIdempotent, deadline, deadline, attempt).status;
}

}  // namespace tpud::etcd
