// The TPU RPCs of SupervisorService: GetTpu, ResetTpu, Doctor. Thin:
// they gather what the loop knows through RunOnLoop, call TpuRecovery or
// TpuPreflight on this gRPC thread, and convert.
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "daemon/core/run_on_loop.h"
#include "daemon/rpc/convert.h"
#include "daemon/rpc/service.h"

namespace tpud {
namespace {

constexpr auto kCancelPoll = std::chrono::milliseconds(200);  // How often a waiting call notices a cancel.

void ToProto(const TpuNode& node, v1::TpuNode* out) {
  out->set_name(node.name);
  out->set_state(node.state);
  out->set_health(node.health);
  out->set_health_description(node.health_description);
  out->set_accelerator_type(node.accelerator_type);
  for (const Symptom& s : node.symptoms) {
    v1::TpuSymptom* symptom = out->add_symptoms();
    symptom->set_create_time(s.create_time);
    symptom->set_symptom_type(s.symptom_type);
    symptom->set_details(s.details);
    symptom->set_worker_id(s.worker_id);
  }
}

void ToProto(const TpuResetResult& result, v1::TpuReset* out) {
  out->set_attempted(result.attempted);
  out->set_backend(result.backend);
  out->set_duration_seconds(result.duration.count());
  out->set_result(result.status.ok() ? "ok" : std::string(result.status.message()));
}

void ToProto(const TpuResetRecord& record, v1::TpuReset* out) {
  ToProto(record.result, out);
  out->set_job(record.job);
  out->set_rung(record.rung);
  out->set_why(record.why);
  out->set_finished_unix_ms(ToUnixMillis(record.finished));
}

// What Doctor checks, read on the loop: each job's spec and live attempt.
struct DoctorTargets {
  std::vector<std::pair<JobSpec, int>> jobs;  // Spec, own attempt's pgid (0: none).
  std::vector<int> pgids;                     // All live attempts.
};

absl::StatusOr<DoctorTargets> ReadTargets(const Supervisor& supervisor, const std::string& job) {
  DoctorTargets targets;
  targets.pgids = supervisor.AttemptProcessGroups();
  for (const JobSnapshot& s : supervisor.List()) {
    if (job.empty() || s.name == job) targets.jobs.emplace_back(s.spec, s.pid);
  }
  if (!job.empty() && targets.jobs.empty()) return absl::NotFoundError(absl::StrCat("unknown job \"", job, "\""));
  if (targets.jobs.empty()) targets.jobs.emplace_back(JobSpec{}, 0);  // No jobs: the host's checks alone.
  return targets;
}

}  // namespace

grpc::Status SupervisorService::GetTpu(grpc::ServerContext*, const v1::GetTpuRequest*, v1::GetTpuResponse* resp) {
  resp->set_backend(tpu_backend_);
  if (tpu_recovery_ == nullptr) {
    resp->set_node_error("no TPU reset backend (tpu.reset.backend: none)");
    return grpc::Status::OK;
  }
  const TpuRecoveryStatus status = tpu_recovery_->Status();
  resp->set_resets_last_hour(status.resets_last_hour);
  resp->set_max_resets_per_hour(status.max_resets_per_hour);
  resp->set_running(status.running);
  resp->set_queued(status.queued);
  if (status.last) ToProto(*status.last, resp->mutable_last_reset());
  CancelToken cancel;
  // A node described in the last second is answered from the cache: tpuctl
  // reset-tpu polls through a reset of up to 30 minutes.
  const absl::StatusOr<TpuNode> node = tpu_recovery_->Describe(&cancel, Seconds(1));
  if (node.ok()) {
    ToProto(*node, resp->mutable_node());
  } else {
    resp->set_node_error(std::string(node.status().message()));
  }
  return grpc::Status::OK;
}

grpc::Status SupervisorService::ResetTpu(grpc::ServerContext* ctx, const v1::ResetTpuRequest* req,
                                         v1::ResetTpuResponse* resp) {
  if (tpu_recovery_ == nullptr) {
    return ToGrpcStatus(absl::FailedPreconditionError("no TPU reset backend (tpu.reset.backend: none)"));
  }
  const std::vector<int> pgids = RunOnLoop(io_, [&] { return supervisor_.AttemptProcessGroups(); });
  auto done = std::make_shared<std::promise<TpuResetResult>>();
  std::future<TpuResetResult> result = done->get_future();
  const absl::Status queued =
      tpu_recovery_->ResetByHand(req->backend(), pgids, [done](TpuResetResult r) { done->set_value(std::move(r)); });
  if (!queued.ok()) return ToGrpcStatus(queued);
  while (result.wait_for(kCancelPoll) != std::future_status::ready) {
    if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "the reset goes on in tpud");
  }
  const TpuResetResult reset = result.get();
  const std::optional<TpuResetRecord> last = tpu_recovery_->Status().last;
  if (last && last->job.empty()) {
    ToProto(*last, resp->mutable_reset());  // This one, with its rung and time.
  } else {
    ToProto(reset, resp->mutable_reset());
  }
  return grpc::Status::OK;
}

grpc::Status SupervisorService::Doctor(grpc::ServerContext*, const v1::DoctorRequest* req,
                                       v1::DoctorResponse* resp) {
  resp->set_backend(tpu_backend_);
  if (tpu_checks_ == nullptr) return ToGrpcStatus(absl::FailedPreconditionError("TPU checks are not set up"));
  const absl::StatusOr<DoctorTargets> targets = RunOnLoop(io_, [&] { return ReadTargets(supervisor_, req->job()); });
  if (!targets.ok()) return ToGrpcStatus(targets.status());
  CancelToken cancel;
  for (const auto& [spec, own_pgid] : targets->jobs) {
    v1::DoctorResponse::JobChecks* job = resp->add_jobs();
    job->set_job(spec.name);
    for (const TpuCheck& check : tpu_checks_->Doctor(spec, targets->pgids, own_pgid, &cancel)) {
      v1::DoctorCheck* out = job->add_checks();
      out->set_name(check.name);
      out->set_ok(check.ok);
      out->set_detail(check.detail);
      out->set_fix(check.fix);
    }
  }
  AddSliceChecks(resp);
  return grpc::Status::OK;
}

}  // namespace tpud
