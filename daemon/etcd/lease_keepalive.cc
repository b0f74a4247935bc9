#include "daemon/etcd/lease_keepalive.h"

#include <algorithm>
#include <deque>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "daemon/etcd/stream_call.h"
#include "daemon/etcd/unary_call.h"

namespace tpud::etcd {
namespace {

namespace pb = etcdserverpb;
using Call = StreamCall<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>;

constexpr std::chrono::milliseconds kFirstBackoff{25};
constexpr std::chrono::milliseconds kMaxBackoff{500};

std::string Broken(const std::string& endpoint, Call& call, absl::string_view when) {
  const grpc::Status status = call.Close();
  return std::string(ToStatus(status, endpoint, absl::StrCat("LeaseKeepAlive ", when)).message());
}

}  // namespace

GrpcLeaseKeepAlive::GrpcLeaseKeepAlive(std::shared_ptr<EndpointPool> pool, Lease lease, LostCallback on_lost)
    : pool_(std::move(pool)),
      lease_(lease),
      on_lost_(std::move(on_lost)),
      interval_(std::chrono::duration_cast<std::chrono::milliseconds>(lease.ttl) / 3),
      expires_(Clock::now() + lease.ttl),
      backoff_(kFirstBackoff) {
  thread_ = std::thread([this] { Run(); });
}

GrpcLeaseKeepAlive::~GrpcLeaseKeepAlive() { Stop(); }

void GrpcLeaseKeepAlive::Stop() {
  control_.RequestStop();
  JoinUnlessSelf(thread_, join_mu_);
}

void GrpcLeaseKeepAlive::Run() {
  while (!control_.stopping()) {
    if (Clock::now() >= expires_) {
      ReportLost(absl::DeadlineExceededError(absl::StrCat("etcd: lease ", lease_.id, " not renewed within its TTL of ",
                                                          lease_.ttl.count(), " s")));
      return;
    }
    const std::size_t index = pool_->current();
    const absl::Status broken = RunStream(index);
    if (broken.ok()) return;
    if (Clock::now() >= expires_) continue;  // Lost, not broken: reported above.
    if (failures_++ == 0) {
      spdlog::warn("etcd: lease {}: keepalive stream failed, retrying: {}", lease_.id,
                   std::string(broken.message()));
    }
    pool_->FailedOver(index);
    control_.SleepUntil(std::min(expires_, Clock::now() + backoff_));
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }
}

absl::Status GrpcLeaseKeepAlive::RunStream(std::size_t index) {
  const EndpointPool::Member& member = pool_->member(index);
  Call call([&](grpc::ClientContext* c, grpc::CompletionQueue* q) {
    return member.lease->PrepareAsyncLeaseKeepAlive(c, q);
  });
  if (!control_.Register([&call] { call.Cancel(); })) return absl::OkStatus();
  struct Unregister {
    StopControl& control;
    ~Unregister() { control.Unregister(); }
  } unregister{control_};
  if (!call.Started(std::min(expires_, Clock::now() + pool_->options().dial_timeout))) {
    return absl::UnavailableError(Broken(member.name, call, "start"));
  }
  pb::LeaseKeepAliveRequest request;
  request.set_id(lease_.id);
  std::deque<Deadline> sent;  // When each unanswered renewal was sent, oldest first.
  Deadline next_send = Clock::now();
  for (;;) {
    if (control_.stopping()) return absl::OkStatus();
    const Deadline now = Clock::now();
    if (now >= expires_) return absl::DeadlineExceededError("lease expiry passed");
    if (now >= next_send) {
      if (!call.Write(request, std::min(expires_, now + pool_->options().request_timeout))) {
        return absl::UnavailableError(Broken(member.name, call, "write"));
      }
      sent.push_back(now);
      next_send = now + interval_;
    }
    const Call::ReadResult read = call.Read(std::min(next_send, expires_));
    if (read == Call::ReadResult::kTimeout) continue;
    if (read == Call::ReadResult::kEnded) {
      if (control_.stopping()) return absl::OkStatus();
      return absl::UnavailableError(Broken(member.name, call, "read"));
    }
    if (sent.empty()) continue;  // Not an answer to us; etcd sends none such.
    const Deadline sent_at = sent.front();
    sent.pop_front();
    if (!Renewed(call.response().ttl(), sent_at, member.name)) return absl::OkStatus();
  }
}

bool GrpcLeaseKeepAlive::Renewed(int64_t ttl_seconds, Deadline sent_at, const std::string& endpoint) {
  if (ttl_seconds <= 0) {
    ReportLost(absl::NotFoundError(absl::StrCat("etcd ", endpoint, ": lease ", lease_.id,
                                                " expired or revoked (keepalive answered TTL ", ttl_seconds, ")")));
    return false;
  }
  expires_ = sent_at + std::chrono::seconds(ttl_seconds);
  if (failures_ > 0) spdlog::info("etcd: lease {}: renewed again through {}", lease_.id, endpoint);
  failures_ = 0;
  backoff_ = kFirstBackoff;
  return true;
}

void GrpcLeaseKeepAlive::ReportLost(const absl::Status& why) {
  if (control_.stopping() || !alive_.exchange(false)) return;
  spdlog::warn("etcd: lease {} lost: {}", lease_.id, std::string(why.message()));
  if (on_lost_) on_lost_(lease_.id, why);
}

}  // namespace tpud::etcd
