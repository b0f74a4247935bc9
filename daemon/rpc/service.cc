#include "daemon/rpc/service.h"

#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "daemon/core/run_on_loop.h"
#include "daemon/core/text.h"
#include "daemon/process/log_file.h"
#include "daemon/rpc/convert.h"

namespace tpud {
namespace {

constexpr auto kStreamPoll = std::chrono::milliseconds(200);  // How often a stream notices a cancel.
constexpr std::size_t kStreamQueueBytes = 8 << 20;
constexpr int kMaxTailLines = 100000;
constexpr int kDefaultTailLines = 10;
// One TailLogs message: far below gRPC's 4 MiB default receive limit, so a
// large tail (100,000 lines) arrives as several messages, never as one too big.
constexpr std::size_t kTailChunkBytes = 1 << 20;

std::int64_t TimeOf(const v1::WatchEventsResponse& resp) {
  return resp.has_event() ? resp.event().time_unix_ms() : resp.incident().time_unix_ms();
}

}  // namespace

absl::StatusOr<FollowSlots::Slot> FollowSlots::Acquire(std::uint32_t uid) {
  absl::MutexLock lock(&mu_);
  int& mine = by_uid_[uid];
  if (uid == 0 ? mine >= kRootTotal : (mine >= kPerUid || non_root_ >= kNonRootTotal)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many followed streams (logs -f, events -f) open: at most ",
        uid == 0 ? kRootTotal : (mine >= kPerUid ? kPerUid : kNonRootTotal),
        uid == 0 ? " for root" : (mine >= kPerUid ? " per user" : " for all non-root users"),
        "; end some first"));
  }
  ++mine;
  if (uid != 0) ++non_root_;
  return Slot(nullptr, [this, uid](void*) {
    absl::MutexLock lock(&mu_);
    if (--by_uid_[uid] == 0) by_uid_.erase(uid);
    if (uid != 0) --non_root_;
  });
}

namespace {

template <typename Response>
grpc::Status Reply(const absl::StatusOr<JobSnapshot>& snapshot, Response* resp) {
  if (!snapshot.ok()) return ToGrpcStatus(snapshot.status());
  ToProto(*snapshot, resp->mutable_job());
  return grpc::Status::OK;
}

}  // namespace

std::optional<Caller> SupervisorService::CallerOf(grpc::ServerContext* ctx) const {
  if (peers_ == nullptr) return std::nullopt;
  const std::optional<PeerCredentials> peer = peers_->Find(ctx->peer());
  if (!peer) return Caller{65534, 65534, {}};  // Unknown: treated as nobody, never as root.
  return Caller{peer->uid, peer->gid, std::vector<std::uint32_t>(peer->groups.begin(), peer->groups.end())};
}

absl::StatusOr<FollowSlots::Slot> SupervisorService::FollowSlot(grpc::ServerContext* ctx) {
  const std::optional<Caller> caller = CallerOf(ctx);
  return follow_slots_.Acquire(caller ? caller->uid : 0);
}

absl::StatusOr<JobSpec> SupervisorService::SpecFromRequest(const v1::StartJobRequest& req) const {
  JobSpec spec;
  if (req.has_ad_hoc()) {
    spec.name = req.name();
    spec.command.assign(req.ad_hoc().command().begin(), req.ad_hoc().command().end());
    spec.working_dir = req.ad_hoc().working_dir();
    spec.env.insert(req.ad_hoc().env().begin(), req.ad_hoc().env().end());
    spec.origin = "adhoc";
    if (absl::Status s = ValidateJobSpec(spec); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("invalid job spec: ", s.message()));
    }
    return spec;
  }
  const std::string source = req.spec_source().empty() ? "request" : req.spec_source();
  const std::filesystem::path base = std::filesystem::path(source).parent_path();
  absl::StatusOr<JobSpec> parsed = ParseJobSpec(req.spec_yaml(), source, base.empty() ? "/" : base);
  if (!parsed.ok()) return parsed.status();
  if (!req.name().empty() && req.name() != parsed->name) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": name: \"", parsed->name,
                                                   "\" differs from the requested \"", req.name(), "\""));
  }
  parsed->origin = absl::StrCat("submitted:", source);
  return parsed;
}

grpc::Status SupervisorService::StartJob(grpc::ServerContext* ctx, const v1::StartJobRequest* req,
                                         v1::StartJobResponse* resp) {
  if (req->spec_case() == v1::StartJobRequest::SPEC_NOT_SET) {
    return Reply(RunOnLoop(io_, [&] { return supervisor_.Start(req->name(), "started by tpuctl"); }),
                 resp);
  }
  absl::StatusOr<JobSpec> spec = SpecFromRequest(*req);
  if (!spec.ok()) return ToGrpcStatus(spec.status());
  // Kept so a restarted tpud can bring the job back.
  const std::string yaml = req->has_ad_hoc() ? AdHocJobSpecYaml(*spec) : req->spec_yaml();
  const std::optional<Caller> caller = CallerOf(ctx);
  return Reply(
      RunOnLoop(io_, [&] { return supervisor_.SubmitAndStart(*spec, "submitted by tpuctl", yaml, caller); }), resp);
}

grpc::Status SupervisorService::RemoveJob(grpc::ServerContext* ctx, const v1::RemoveJobRequest* req,
                                          v1::RemoveJobResponse*) {
  const std::optional<Caller> caller = CallerOf(ctx);
  return ToGrpcStatus(RunOnLoop(io_, [&] { return supervisor_.RemoveSubmittedJob(req->name(), caller); }));
}

grpc::Status SupervisorService::StopJob(grpc::ServerContext*, const v1::StopJobRequest* req,
                                        v1::StopJobResponse* resp) {
  return Reply(RunOnLoop(io_, [&] { return supervisor_.Stop(req->name(), "stopped by tpuctl"); }), resp);
}

grpc::Status SupervisorService::RestartJob(grpc::ServerContext*, const v1::RestartJobRequest* req,
                                           v1::RestartJobResponse* resp) {
  return Reply(RunOnLoop(io_, [&] { return supervisor_.Restart(req->name(), "restarted by tpuctl"); }),
               resp);
}

grpc::Status SupervisorService::GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                                       v1::GetJobResponse* resp) {
  absl::StatusOr<JobSnapshot> job = RunOnLoop(io_, [&] { return supervisor_.Get(req->name()); });
  const bool gang = job.ok() && job->spec.gang;
  grpc::Status status = Reply(job, resp);
  if (gang) AddGang(resp->mutable_job());
  return status;
}

grpc::Status SupervisorService::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                         v1::ListJobsResponse* resp) {
  for (const JobSnapshot& job : RunOnLoop(io_, [&] { return supervisor_.List(); })) {
    ToProto(job, resp->add_jobs());
    if (job.spec.gang) AddGang(resp->mutable_jobs(resp->jobs_size() - 1));
  }
  return grpc::Status::OK;
}

grpc::Status SupervisorService::WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                                            grpc::ServerWriter<v1::WatchEventsResponse>* writer) {
  const std::string job = req->job();
  absl::StatusOr<FollowSlots::Slot> slot = req->follow() ? FollowSlot(ctx) : FollowSlots::Slot();
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  struct Start {
    absl::StatusOr<std::vector<NumberedEvent>> history;
    std::shared_ptr<FanoutQueue<NumberedEvent>> queue;
    std::set<std::string> gangs;  // Gang jobs here: their events name this worker, and merge the others'.
  };
  // Subscribe and read the history in one turn of the loop: no event is lost or repeated.
  Start start = RunOnLoop(io_, [&]() -> Start {
    if (!job.empty() && !supervisor_.HasJob(job)) {
      return {absl::NotFoundError(absl::StrCat("unknown job \"", Truncated(job), "\"")), nullptr, {}};
    }
    Start out;
    for (const JobSnapshot& snapshot : supervisor_.List()) {
      if (snapshot.spec.gang && (job.empty() || snapshot.name == job)) out.gangs.insert(snapshot.name);
    }
    out.queue = req->follow() ? supervisor_.events().Subscribe(job, 100000) : nullptr;
    out.history = supervisor_.EventHistory(job, static_cast<std::size_t>(std::max(0, req->history())));
    return out;
  });
  if (!start.history.ok()) return ToGrpcStatus(start.history.status());
  const int worker = start.gangs.empty() ? -1 : SliceWorker().value_or(-1);  // -1: no gang here.
  auto convert = [&](const NumberedEvent& event) {
    v1::WatchEventsResponse resp;
    ToProto(event, &resp);
    if (worker >= 0 && resp.has_event() && start.gangs.count(resp.event().job()) != 0) {
      resp.mutable_event()->set_worker(worker);
    }
    return resp;
  };
  std::vector<v1::WatchEventsResponse> history;
  for (const NumberedEvent& event : *start.history) history.push_back(convert(event));
  PeerCursor peers_seen;
  if (worker >= 0) {
    // The other workers' events go between this worker's, by time; the
    // requested history counts them all.
    std::vector<v1::WatchEventsResponse> peers = PeerEvents(job, peers_seen);
    std::vector<v1::WatchEventsResponse> merged;
    std::merge(std::make_move_iterator(history.begin()), std::make_move_iterator(history.end()),
               std::make_move_iterator(peers.begin()), std::make_move_iterator(peers.end()),
               std::back_inserter(merged), [](const v1::WatchEventsResponse& a, const v1::WatchEventsResponse& b) {
                 return TimeOf(a) < TimeOf(b);
               });
    const std::size_t keep = req->history() > 0 ? static_cast<std::size_t>(req->history()) : merged.size();
    if (merged.size() > keep) merged.erase(merged.begin(), merged.end() - static_cast<std::ptrdiff_t>(keep));
    history = std::move(merged);
  }
  for (const v1::WatchEventsResponse& resp : history) {
    if (!writer->Write(resp)) return grpc::Status::OK;
  }
  while (start.queue && !ctx->IsCancelled() && !start.queue->closed()) {
    std::optional<NumberedEvent> event = start.queue->Pop(kStreamPoll);
    if (event && !writer->Write(convert(*event))) break;
    if (worker < 0) continue;
    bool written = true;
    for (const v1::WatchEventsResponse& resp : PeerEvents(job, peers_seen)) {
      if (!(written = writer->Write(resp))) break;
    }
    if (!written) break;
  }
  return grpc::Status::OK;
}

grpc::Status SupervisorService::TailLogs(grpc::ServerContext* ctx, const v1::TailLogsRequest* req,
                                         grpc::ServerWriter<v1::TailLogsResponse>* writer) {
  absl::StatusOr<FollowSlots::Slot> slot = req->follow() ? FollowSlot(ctx) : FollowSlots::Slot();
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  const int lines = std::min(req->lines() < 0 ? kDefaultTailLines : req->lines(), kMaxTailLines);
  // Read the tail and subscribe in one turn of the loop, which is also where
  // output is written: the stream continues the file with no gap or overlap.
  auto [tail, queue] = RunOnLoop(io_, [&]() -> std::pair<absl::StatusOr<std::vector<std::string>>,
                                                         std::shared_ptr<FanoutQueue<std::string>>> {
    if (!supervisor_.HasJob(req->job())) {
      return {absl::NotFoundError(absl::StrCat("unknown job \"", Truncated(req->job()), "\"")), nullptr};
    }
    auto q = req->follow() ? supervisor_.output().Subscribe(req->job(), kStreamQueueBytes) : nullptr;
    return {ReadLastLines(supervisor_.LogPath(req->job()), lines), q};
  });
  if (!tail.ok()) return ToGrpcStatus(tail.status());
  v1::TailLogsResponse resp;
  for (const std::string& line : *tail) {
    if (!resp.data().empty() && resp.data().size() + line.size() > kTailChunkBytes) {
      if (!writer->Write(resp)) return grpc::Status::OK;
      resp.Clear();
    }
    resp.mutable_data()->append(line);
  }
  if (!resp.data().empty() && !writer->Write(resp)) return grpc::Status::OK;
  while (queue && !ctx->IsCancelled() && !queue->closed()) {
    std::optional<std::string> line = queue->Pop(kStreamPoll);
    if (!line) continue;
    resp.Clear();
    resp.set_data(std::move(*line));
    while (resp.data().size() < 64 * 1024) {  // Batch what is already queued.
      std::optional<std::string> more = queue->Pop(std::chrono::milliseconds(0));
      if (!more) break;
      resp.mutable_data()->append(*more);
    }
    resp.set_dropped_bytes(static_cast<std::int64_t>(queue->TakeDropped()));
    if (!writer->Write(resp)) break;
  }
  return grpc::Status::OK;
}

grpc::Status SupervisorService::GetDaemonInfo(grpc::ServerContext*, const v1::GetDaemonInfoRequest*,
                                              v1::GetDaemonInfoResponse* resp) {
  resp->set_version(info_.version);
  resp->set_metrics_address(info_.metrics_address);
  resp->set_pid(::getpid());
  resp->set_config_path(info_.config_path);
  resp->set_start_time_unix_ms(info_.start_time_unix_ms);
  resp->set_attempt_cgroups(info_.attempt_cgroups);
  const StoreHealth store = RunOnLoop(io_, [&] { return supervisor_.store_health(); });
  resp->set_state_store_ok(store.ok);
  resp->set_state_store_error(store.last_error);
  resp->set_state_store_errors_total(store.errors_total);
  return grpc::Status::OK;
}

}  // namespace tpud
