#include "daemon/app/slice_link.h"

#include <unistd.h>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/supervisor/job_state.h"
#include "daemon/tpu/slice_reset.h"
#include "spdlog/spdlog.h"

namespace tpud {
namespace {

constexpr auto kStatusInterval = std::chrono::seconds(1);

// This worker's newest transitions of `job`, as the other workers show them.
slice::WorkerEvents WorkerEventsOf(const Supervisor& supervisor, const std::string& job, int worker) {
  slice::WorkerEvents out;
  out.worker = worker;
  for (const NumberedEvent& numbered : supervisor.EventHistory(job, 2 * slice::WorkerEvents::kMaxWorkerEvents)) {
    const auto* event = std::get_if<JobEvent>(&numbered.event);
    if (event == nullptr) continue;  // Incidents stay on their worker (`tpuctl incident` there).
    slice::GangEvent gang_event;
    gang_event.sequence = numbered.sequence;
    gang_event.time_unix_ms = ToUnixMillis(event->time);
    gang_event.from = JobStateName(event->from);
    gang_event.to = JobStateName(event->to);
    gang_event.reason = event->reason;
    gang_event.attempt = event->attempt;
    if (event->checkpoint && event->checkpoint->step >= 0) gang_event.step = event->checkpoint->step;
    gang_event.exit = event->exit;
    out.events.push_back(std::move(gang_event));
  }
  if (out.events.size() > slice::WorkerEvents::kMaxWorkerEvents) {
    out.events.erase(out.events.begin(),
                     out.events.end() - static_cast<std::ptrdiff_t>(slice::WorkerEvents::kMaxWorkerEvents));
  }
  return out;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

// The metadata server, when tpud may use it and one answers.
std::unique_ptr<MetadataClient> MetadataFor(const GceMetadataConfig& config) {
  if (config.enabled == "false") return nullptr;
  auto metadata = std::make_unique<MetadataClient>(MetadataBaseUrl(config.host));
  if (config.enabled == "auto" && !metadata->Probe().ok()) return nullptr;
  return metadata;
}

slice::SliceReset ResetKind(const DaemonConfig& config) {
  if (config.tpu.backend == "local") return slice::SliceReset::kLocal;  // Every worker its own devices.
  if (!config.tpu.queued_resource.empty()) return slice::SliceReset::kSlice;
  return slice::SliceReset::kNone;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SliceLink>> SliceLink::Create(boost::asio::io_context& io,
                                                             const DaemonConfig& config) {
  if (!config.slice) return std::unique_ptr<SliceLink>();
  const SliceConfig& slice = *config.slice;
  std::unique_ptr<SliceLink> link(new SliceLink(io, config));
  const bool needs_metadata = !slice.worker_id || !slice.num_workers || (slice.name.empty() && config.tpu.name.empty());
  std::unique_ptr<MetadataClient> metadata = needs_metadata ? MetadataFor(config.gce_metadata) : nullptr;
  absl::StatusOr<SliceIdentity> identity = ResolveSliceIdentity(slice, config.tpu.name, metadata.get(), ProcessEnv);
  if (!identity.ok()) {
    return absl::Status(identity.status().code(), absl::StrCat("slice: ", identity.status().message()));
  }
  link->identity_ = *identity;

  etcd::ClientOptions options;
  options.endpoints = slice.etcd.endpoints;
  if (!slice.etcd.tls.ca.empty() || !slice.etcd.tls.cert.empty()) {
    options.tls = etcd::TlsFiles{slice.etcd.tls.ca.string(), slice.etcd.tls.cert.string(), slice.etcd.tls.key.string()};
  }
  absl::StatusOr<std::unique_ptr<etcd::GrpcEtcdClient>> client = etcd::GrpcEtcdClient::Create(options);
  if (!client.ok()) return absl::Status(client.status().code(), absl::StrCat("slice.etcd: ", client.status().message()));
  link->etcd_ = *std::move(client);
  link->endpoints_ = link->etcd_->endpoints();

  slice::CoordinatorOptions coordinator;
  coordinator.prefix = slice.etcd.prefix;
  coordinator.slice = identity->name;
  coordinator.worker_id = identity->worker_id;
  coordinator.num_workers = identity->num_workers;
  coordinator.lease_ttl = std::chrono::seconds(slice.etcd.lease_seconds);
  coordinator.host = HostName();
  coordinator.state_dir = config.state_dir;
  coordinator.reset = ResetKind(config);
  if (coordinator.reset == slice::SliceReset::kSlice) coordinator.reset_slice = MakeSliceReset(config.tpu);
  slice::CoordinatorHooks hooks;
  SliceLink* self = link.get();
  hooks.post = [&io](std::function<void()> fn) { boost::asio::post(io, std::move(fn)); };
  hooks.on_commit = [self](const std::string& job, const GangCommit& commit) {
    if (self->supervisor_ != nullptr) self->supervisor_->OnGangCommitted(job, commit);
  };
  hooks.on_spec = [self](const std::string& job, const std::string& spec_yaml) { self->OnSpec(job, spec_yaml); };
  hooks.on_membership = [self](const std::string& conflict) {
    if (self->supervisor_ != nullptr) self->supervisor_->OnSliceMembership(conflict);
  };
  link->coordinator_ = std::make_unique<slice::Coordinator>(*link->etcd_, coordinator, hooks);
  spdlog::info("slice {}: this is worker {} of {} ({}); etcd at {}", identity->name, identity->worker_id,
               identity->num_workers, identity->source, absl::StrJoin(link->endpoints_, ", "));
  return link;
}

SliceLink::~SliceLink() { Stop(); }

void SliceLink::Wire(Supervisor::Deps* deps) const {
  deps->gang = coordinator_.get();
  deps->worker_id = identity_.worker_id;
  deps->num_workers = identity_.num_workers;
  deps->reset_is_local = config_.tpu.backend == "local";
}

void SliceLink::Start(Supervisor& supervisor) {
  supervisor_ = &supervisor;
  coordinator_->Start();
  PublishStatuses();
}

void SliceLink::Stop() {
  timer_.cancel();
  if (coordinator_) coordinator_->Stop();
}

void SliceLink::OnSpec(const std::string& job, const std::string& spec_yaml) {
  if (supervisor_ == nullptr) return;
  absl::StatusOr<JobSpec> spec = ParseJobSpec(spec_yaml, absl::StrCat("slice gang ", job), config_.state_dir);
  if (spec.ok() && spec->name != job) {
    spec = absl::InvalidArgumentError(absl::StrCat("names job \"", spec->name, "\", stored as \"", job, "\""));
  }
  if (spec.ok() && !spec->gang) spec = absl::InvalidArgumentError("gang: is not true");
  if (spec.ok() && (spec->user.empty() || spec->group.empty())) {
    // Published without the identity the submitting worker admitted (an
    // older tpud, or a hand-written key): never run it as this tpud.
    spec = absl::PermissionDeniedError(
        "it names no user and group; a gang spec runs as the identity its submitter's tpud admitted, never as tpud");
  }
  if (!spec.ok()) {
    spdlog::error("slice {}: gang spec {} from etcd refused: {}", identity_.name, job,
                  std::string(spec.status().message()));
    return;
  }
  spec->origin = "slice";
  const bool known = supervisor_->HasJob(job);
  if (absl::Status s = supervisor_->AdoptGangSpec(*std::move(spec), spec_yaml); !s.ok()) {
    spdlog::error("slice {}: gang job {}: {}", identity_.name, job, std::string(s.message()));
    return;
  }
  if (!known) spdlog::info("slice {}: gang job {} added (submitted on another worker)", identity_.name, job);
}

SliceMetrics SliceLink::Metrics() const {
  const slice::SliceView view = coordinator_->View();
  SliceMetrics metrics;
  metrics.etcd_up = view.etcd_up;
  metrics.leader = view.leader == identity_.worker_id;
  for (int worker = 0; worker < view.num_workers; ++worker) {
    if (view.members.count(worker) != 0) {
      ++metrics.workers_up;
    } else {
      ++metrics.workers_lost;
    }
  }
  for (const slice::SliceView::Gang& gang : view.gangs) {
    if (!gang.record) continue;
    metrics.gang_generation[gang.job] = gang.record->commit.generation;
    for (const auto& [failure_class, count] : gang.record->commit.restarts_by_reason) {
      metrics.gang_restarts[{gang.job, failure_class}] = count;
    }
  }
  return metrics;
}

void SliceLink::PublishStatuses() {
  if (supervisor_ == nullptr) return;
  for (const JobSnapshot& job : supervisor_->List()) {
    if (!job.spec.gang) continue;
    slice::WorkerJobStatus status;
    status.worker = identity_.worker_id;
    status.state = JobStateName(job.state);
    status.reason = job.reason;
    status.attempt = job.attempt;
    status.pid = job.pid;
    status.generation = job.gang_generation;
    status.last_step = job.last_step;
    status.state_since_unix_ms = ToUnixMillis(job.state_since);
    coordinator_->PublishStatus(job.name, status);
    coordinator_->PublishEvents(job.name, WorkerEventsOf(*supervisor_, job.name, identity_.worker_id));
  }
  timer_.expires_after(kStatusInterval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) PublishStatuses();
  });
}

}  // namespace tpud
