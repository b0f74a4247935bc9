#include "daemon/etcd/watcher.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/etcd/convert.h"
#include "daemon/etcd/stream_call.h"
#include "daemon/etcd/unary_call.h"

namespace tpud::etcd {
namespace {

namespace pb = etcdserverpb;
using Call = StreamCall<pb::WatchRequest, pb::WatchResponse>;

constexpr std::chrono::milliseconds kFirstBackoff{25};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

absl::Status Broken(const std::string& endpoint, Call& call, absl::string_view when) {
  return ToStatus(call.Close(), endpoint, absl::StrCat("Watch ", when));
}

}  // namespace

GrpcWatcher::GrpcWatcher(std::shared_ptr<EndpointPool> pool, WatchOptions options, Callback callback)
    : pool_(std::move(pool)),
      options_(std::move(options)),
      callback_(std::move(callback)),
      next_revision_(std::max<int64_t>(options_.start_revision, 0)),
      backoff_(kFirstBackoff) {}

GrpcWatcher::~GrpcWatcher() { Stop(); }

absl::Status GrpcWatcher::Start() {
  thread_ = std::thread([this] { Run(); });
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &GrpcWatcher::CreatedOrEnded),
                         absl::FromChrono(pool_->options().request_timeout));
    if (created_) return absl::OkStatus();
    why = last_error_.ok() ? absl::DeadlineExceededError(absl::StrCat(
                                 "etcd: Watch: not created within ", pool_->options().request_timeout.count(), " ms"))
                           : last_error_;
  }
  Stop();
  return why;
}

bool GrpcWatcher::running() const {
  absl::MutexLock lock(&mu_);
  return running_ && !control_.stopping();
}

void GrpcWatcher::Stop() {
  control_.RequestStop();
  JoinUnlessSelf(thread_, join_mu_);
}

void GrpcWatcher::Run() {
  while (!control_.stopping()) {
    const std::size_t index = pool_->current();
    const absl::Status broken = RunStream(index);
    connected_ = false;
    if (broken.ok()) break;
    {
      absl::MutexLock lock(&mu_);
      last_error_ = broken;
    }
    if (failures_++ == 0) {
      spdlog::warn("etcd: watch {}: stream failed, resuming from revision {}: {}", options_.key,
                   next_revision_.load(), std::string(broken.message()));
    }
    pool_->FailedOver(index);
    control_.SleepUntil(Clock::now() + backoff_);
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }
  absl::MutexLock lock(&mu_);
  running_ = false;
}

absl::Status GrpcWatcher::RunStream(std::size_t index) {
  const EndpointPool::Member& member = pool_->member(index);
  Call call([&](grpc::ClientContext* c, grpc::CompletionQueue* q) { return member.watch->PrepareAsyncWatch(c, q); });
  if (!control_.Register([&call] { call.Cancel(); })) return absl::OkStatus();
  struct Unregister {
    StopControl& control;
    ~Unregister() { control.Unregister(); }
  } unregister{control_};
  const Deadline setup = Clock::now() + pool_->options().request_timeout;  // Until etcd created the watch.
  if (!call.Started(std::min(setup, Clock::now() + pool_->options().dial_timeout))) {
    return Broken(member.name, call, "start");
  }
  if (!call.Write(CreateRequest(), setup)) return Broken(member.name, call, "create");
  bool created = false;
  for (;;) {
    const Call::ReadResult read = call.Read(created ? Deadline::max() : setup);
    if (read == Call::ReadResult::kTimeout) {
      call.Close();
      return absl::DeadlineExceededError(absl::StrCat("etcd ", member.name, ": Watch: not created in time"));
    }
    if (read == Call::ReadResult::kEnded) {
      return control_.stopping() ? absl::OkStatus() : Broken(member.name, call, "read");
    }
    created = created || call.response().created();
    if (Handle(call.response(), member.name)) return absl::OkStatus();
  }
}

bool GrpcWatcher::Handle(const pb::WatchResponse& response, const std::string& endpoint) {
  const std::string where = absl::StrCat("etcd ", endpoint, ": Watch: ");
  WatchUpdate end;
  end.revision = response.header().revision();
  if (response.compact_revision() != 0) {  // Canceled too; may follow a created response.
    end.kind = WatchUpdate::kCompacted;
    end.compact_revision = response.compact_revision();
    End(end, absl::OutOfRangeError(absl::StrCat(where, "revision ", next_revision_.load(),
                                                " has been compacted (oldest kept: ", end.compact_revision, ")")));
    return true;
  }
  if (response.canceled()) {
    end.kind = WatchUpdate::kCanceled;
    end.reason = response.cancel_reason();
    End(end, absl::FailedPreconditionError(absl::StrCat(where, "canceled by etcd: ", end.reason)));
    return true;
  }
  if (response.created()) {
    if (next_revision_.load() <= 0) next_revision_ = response.header().revision() + 1;
    connected_ = true;
    failures_ = 0;
    backoff_ = kFirstBackoff;
    absl::MutexLock lock(&mu_);
    created_ = true;
    return false;
  }
  if (response.events_size() == 0) {  // A progress notification: all up to header.revision sent.
    next_revision_ = std::max(next_revision_.load(), response.header().revision() + 1);
    return false;
  }
  DeliverEvents(response);
  return false;
}

void GrpcWatcher::DeliverEvents(const pb::WatchResponse& response) {
  WatchUpdate update;
  update.kind = WatchUpdate::kEvents;
  const int64_t from = next_revision_.load();
  for (const mvccpb::Event& event : response.events()) {
    if (event.kv().mod_revision() >= from) update.events.push_back(FromProto(event));
  }
  if (update.events.empty()) return;
  update.revision = update.events.back().kv.mod_revision;
  next_revision_ = update.revision + 1;
  if (callback_ && !control_.stopping()) callback_(update);
}

void GrpcWatcher::End(const WatchUpdate& update, const absl::Status& error) {
  bool created;
  {
    absl::MutexLock lock(&mu_);
    created = created_;
    last_error_ = error;
    running_ = false;
  }
  spdlog::warn("etcd: watch {} ended: {}", options_.key, std::string(error.message()));
  if (created && callback_ && !control_.stopping()) callback_(update);
}

pb::WatchRequest GrpcWatcher::CreateRequest() const {
  const pb::RangeRequest range = RangeOf(options_.key, options_.prefix);
  pb::WatchRequest request;
  pb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(range.key());
  create->set_range_end(range.range_end());
  create->set_start_revision(std::max<int64_t>(next_revision_.load(), 0));
  create->set_prev_kv(options_.prev_kv);
  create->set_progress_notify(true);
  return request;
}

}  // namespace tpud::etcd
