// The slice RPC of SupervisorService (GetSlice) and the gang part of a gang
// job's status. Thin: reads the coordinator's view (daemon/slice/coordinator.h)
// and converts; etcd endpoint health is asked on this gRPC thread.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/rpc/convert.h"
#include "daemon/rpc/service.h"

namespace tpud {
namespace {

v1::JobState JobStateFromName(const std::string& name) {
  for (JobState state : {JobState::kStopped, JobState::kStarting, JobState::kRunning, JobState::kBackoff,
                         JobState::kStopping, JobState::kSucceeded, JobState::kFailed}) {
    if (name == JobStateName(state)) return ToProto(state);
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

}  // namespace

void ToProto(const slice::SliceView& view, const slice::SliceView::Gang& gang, v1::GangStatus* out) {
  if (gang.record) {
    const GangCommit& commit = gang.record->commit;
    out->set_generation(commit.generation);
    out->set_phase(GangPhaseName(commit.phase));
    out->set_reason(commit.reason);
    out->set_step(commit.step.value_or(-1));
    out->set_restarts(commit.restarts);
    for (const auto& [reason, count] : commit.restarts_by_reason) (*out->mutable_restarts_by_reason())[reason] = count;
    out->set_waiting_for(commit.phase == GangPhase::kStopping ? gang.waiting_for : "");
  }
  if (!view.etcd_up) {
    out->set_etcd_down_since_unix_ms(view.etcd_down_since_unix_ms);
    out->set_etcd_error(view.etcd_error);
  }
  out->set_config_conflict(view.config_conflict);
  for (int worker = 0; worker < view.num_workers; ++worker) {
    v1::WorkerJobStatus* row = out->add_workers();
    row->set_worker(worker);
    row->set_last_step(-1);
    const auto member = view.members.find(worker);
    row->set_up(member != view.members.end());
    if (member != view.members.end()) row->set_host(member->second.host);
    const auto status = gang.statuses.find(worker);
    if (status == gang.statuses.end()) continue;
    const slice::WorkerJobStatus& s = status->second;
    row->set_state(JobStateFromName(s.state));
    row->set_reason(s.reason);
    row->set_attempt(s.attempt);
    row->set_pid(s.pid);
    row->set_generation(s.generation);
    row->set_last_step(s.last_step.value_or(-1));
    row->set_state_since_unix_ms(s.state_since_unix_ms);
  }
}

void SupervisorService::AddGang(v1::JobStatus* job) const {
  if (slice_ == nullptr) return;
  const slice::SliceView view = slice_->View();
  for (const slice::SliceView::Gang& gang : view.gangs) {
    if (gang.job == job->name()) ToProto(view, gang, job->mutable_gang());
  }
}

std::optional<int> SupervisorService::SliceWorker() const {
  if (slice_ == nullptr) return std::nullopt;
  return slice_->View().worker_id;
}

std::vector<v1::WatchEventsResponse> SupervisorService::PeerEvents(const std::string& job, PeerCursor& seen) const {
  std::vector<v1::WatchEventsResponse> out;
  if (slice_ == nullptr) return out;
  const slice::SliceView view = slice_->View();
  for (const slice::SliceView::Gang& gang : view.gangs) {
    if (!job.empty() && gang.job != job) continue;
    for (const auto& [worker, events] : gang.events) {
      if (worker == view.worker_id) continue;  // This worker's own come from its supervisor.
      std::pair<std::int64_t, std::int64_t>& newest = seen[{gang.job, worker}];
      for (const slice::GangEvent& e : events.events) {
        if (std::make_pair(e.time_unix_ms, e.sequence) <= newest) continue;
        v1::JobEvent* event = out.emplace_back().mutable_event();
        event->set_sequence(e.sequence);
        event->set_time_unix_ms(e.time_unix_ms);
        event->set_job(gang.job);
        event->set_from(JobStateFromName(e.from));
        event->set_to(JobStateFromName(e.to));
        event->set_reason(e.reason);
        event->set_attempt(e.attempt);
        event->set_worker(worker);
        if (e.to == JobStateName(JobState::kStarting)) {
          // The step only: the checkpoint's path is the other worker's.
          ToProto(e.step ? std::optional<CheckpointRef>(CheckpointRef{{}, *e.step}) : std::nullopt,
                  event->mutable_checkpoint());
        }
        if (e.exit) ToProto(*e.exit, event->mutable_exit());
      }
      for (const slice::GangEvent& e : events.events) {
        newest = std::max(newest, std::make_pair(e.time_unix_ms, e.sequence));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const v1::WatchEventsResponse& a, const v1::WatchEventsResponse& b) {
    return a.event().time_unix_ms() < b.event().time_unix_ms();
  });
  return out;
}

void SupervisorService::AddSliceChecks(v1::DoctorResponse* resp) const {
  if (slice_ == nullptr) return;
  v1::DoctorCheck* etcd = resp->add_slice();
  etcd->set_name("etcd");
  const absl::Status health = etcd_ != nullptr ? etcd_->CheckHealth() : absl::UnavailableError("no client");
  etcd->set_ok(health.ok());
  if (health.ok()) {
    etcd->set_detail(absl::StrCat("a quorum answers at ", absl::StrJoin(etcd_endpoints_, ", ")));
  } else {
    etcd->set_detail(std::string(health.message()));
    etcd->set_fix("start etcd, or correct slice.etcd.endpoints; training goes on without it, but a failure "
                  "cannot restart the gang until etcd is back");
  }
  const slice::SliceView view = slice_->View();
  v1::DoctorCheck* members = resp->add_slice();
  members->set_name("members");
  std::vector<std::string> missing;
  for (int worker = 0; worker < view.num_workers; ++worker) {
    if (view.members.count(worker) == 0) missing.push_back(absl::StrCat(worker));
  }
  if (!view.member_conflict.empty()) {
    members->set_ok(false);
    members->set_detail(view.member_conflict);
    members->set_fix("set a distinct slice.worker_id on each worker, or leave it at auto (the metadata server's "
                     "agent-worker-number)");
    return;
  }
  if (!view.config_conflict.empty()) {
    members->set_ok(false);
    members->set_detail(view.config_conflict);
    members->set_fix("give every worker the same slice.num_workers (the slice's host count) and restart tpud "
                     "where it differs");
    return;
  }
  members->set_ok(missing.empty());
  members->set_detail(missing.empty() ? absl::StrCat("all ", view.num_workers, " workers of ", view.slice,
                                                     " are members")
                                      : absl::StrCat("workers ", absl::StrJoin(missing, ", "), " of ",
                                                     view.num_workers, " are not members"));
  if (!missing.empty()) {
    members->set_fix(absl::StrCat("start tpud on every worker, e.g. gcloud compute tpus tpu-vm ssh ", view.slice,
                                  " --worker=all --command='sudo systemctl start tpud'"));
  }
}

grpc::Status SupervisorService::GetSlice(grpc::ServerContext*, const v1::GetSliceRequest* req,
                                         v1::GetSliceResponse* resp) {
  if (slice_ == nullptr) return grpc::Status::OK;  // configured: false.
  const slice::SliceView view = slice_->View();
  resp->set_configured(true);
  resp->set_slice(view.slice);
  resp->set_worker_id(view.worker_id);
  resp->set_num_workers(view.num_workers);
  resp->set_leader(view.leader.value_or(-1));
  resp->set_etcd_up(view.etcd_up);
  resp->set_etcd_error(view.etcd_error);
  resp->set_member_conflict(view.member_conflict);
  if (!view.etcd_up) resp->set_etcd_down_since_unix_ms(view.etcd_down_since_unix_ms);
  resp->set_config_conflict(view.config_conflict);
  std::set<int> workers;
  for (int worker = 0; worker < view.num_workers; ++worker) workers.insert(worker);
  for (const auto& [worker, member] : view.members) workers.insert(worker);
  for (int worker : workers) {
    v1::SliceMember* row = resp->add_members();
    row->set_worker(worker);
    row->set_leader(view.leader == worker);
    const auto member = view.members.find(worker);
    if (member == view.members.end()) continue;
    row->set_up(true);
    row->set_host(member->second.host);
    row->set_version(member->second.version);
  }
  for (const slice::SliceView::Gang& gang : view.gangs) {
    if (!gang.record) continue;
    v1::GangSummary* summary = resp->add_gangs();
    summary->set_job(gang.job);
    ToProto(view, gang, summary->mutable_gang());
  }
  if (req->check_endpoints() && etcd_ != nullptr) {
    for (const std::string& endpoint : etcd_endpoints_) {
      v1::EtcdEndpoint* row = resp->add_endpoints();
      row->set_endpoint(endpoint);
      absl::StatusOr<etcd::MemberStatus> status = etcd_->Status(endpoint);
      if (!status.ok()) {
        row->set_error(std::string(status.status().message()));
        continue;
      }
      row->set_healthy(status->errors.empty() && status->leader != 0);
      row->set_leader(status->is_leader());
      row->set_version(status->version);
      if (!status->errors.empty()) row->set_error(absl::StrJoin(status->errors, "; "));
      if (status->leader == 0) row->set_error("no raft leader");
    }
  }
  return grpc::Status::OK;
}

}  // namespace tpud
