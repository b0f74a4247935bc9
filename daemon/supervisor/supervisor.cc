#include "daemon/supervisor/supervisor.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <random>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/config/config.h"
#include "daemon/core/text.h"
#include "daemon/core/unix_groups.h"
#include "daemon/process/run_as.h"
#include "daemon/supervisor/persistence.h"

namespace tpud {

const std::string& NumberedEvent::job() const {
  return std::visit([](const auto& e) -> const std::string& { return e.job; }, event);
}

Supervisor::Supervisor(Deps deps, Options options) : deps_(std::move(deps)), options_(std::move(options)) {
  if (!deps_.find_checkpoint) deps_.find_checkpoint = FindNewestCheckpoint;
  if (!deps_.find_checkpoint_at_step) deps_.find_checkpoint_at_step = FindCheckpointAtStep;
  if (!deps_.list_checkpoint_steps) deps_.list_checkpoint_steps = ListCompleteSteps;
  if (!deps_.random) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    deps_.random = [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
  }
}

namespace {

Supervisor::Deps Minimal(Clock& clock, Launcher& launcher) {
  Supervisor::Deps deps;
  deps.clock = &clock;
  deps.launcher = &launcher;
  return deps;
}

}  // namespace

Supervisor::Supervisor(Clock& clock, Launcher& launcher, Options options)
    : Supervisor(Minimal(clock, launcher), std::move(options)) {}

Supervisor::~Supervisor() {
  events_.CloseAll();
  output_.CloseAll();
}

JobSpec Supervisor::ForThisWorker(JobSpec spec) const {
  if (!spec.gang || deps_.gang == nullptr) return spec;
  return ExpandWorker(std::move(spec), deps_.worker_id, deps_.num_workers);
}

std::unique_ptr<Job> Supervisor::MakeJob(JobSpec spec) {
  spec = ForThisWorker(std::move(spec));  // One gang spec, as this worker runs it.
  JobDeps deps;
  deps.clock = deps_.clock;
  deps.launcher = deps_.launcher;
  deps.listener = this;
  deps.find_checkpoint = deps_.find_checkpoint;
  deps.find_checkpoint_at_step = deps_.find_checkpoint_at_step;
  deps.list_checkpoint_steps = deps_.list_checkpoint_steps;
  deps.gang = deps_.gang;
  deps.worker_id = deps_.worker_id;
  deps.num_workers = deps_.num_workers;
  deps.reset_is_local = deps_.reset_is_local;
  deps.random = deps_.random;
  deps.watch_file = deps_.watch_file;
  deps.maintenance_active = [this] { return maintenance_active(); };
  if (deps_.reset_tpu) {
    deps.reset_tpu = [this](const TpuResetRequest& request, std::function<void(TpuResetResult)> done) {
      TpuResetRequest spared = request;
      for (int pgid : AttemptProcessGroups()) spared.spare_pgids.push_back(pgid);
      deps_.reset_tpu(spared, std::move(done));
    };
  }
  if (deps_.preflight) {
    deps.preflight = [this](const JobSpec& spec) { return deps_.preflight(spec, AttemptProcessGroups()); };
  }
  deps.resolve_run_as = ResolveRunAs;
  deps.capture_incident = deps_.capture_incident;
  deps.capture_seconds = deps_.capture_seconds;
  deps.log_dir = options_.log_dir;
  deps.default_working_dir = options_.state_dir;
  // A gang job learns the gang's generation from the slice, also when it was
  // committed before the job existed here.
  if (spec.gang && deps_.gang != nullptr) deps_.gang->Join(spec.name);
  auto job = std::make_unique<Job>(std::move(spec), std::move(deps));
  if (job->spec().gang && !slice_conflict_.empty()) job->OnSliceMembership(slice_conflict_);
  return job;
}

void Supervisor::OnSliceMembership(const std::string& conflict) {
  if (slice_conflict_ == conflict) return;
  slice_conflict_ = conflict;
  for (auto& [name, job] : jobs_) {
    if (!job->spec().gang) continue;
    job->OnSliceMembership(conflict);
    if (conflict.empty() && deps_.gang != nullptr) deps_.gang->Join(name);  // Its commit again.
  }
}

void Supervisor::OnGangCommitted(const std::string& job, const GangCommit& commit) {
  if (Job* found = FindJob(job); found != nullptr && found->spec().gang) found->OnGangCommitted(commit);
}

std::vector<int> Supervisor::AttemptProcessGroups() const {
  std::vector<int> pgids;
  for (const auto& [name, job] : jobs_) {
    if (const int pid = job->Snapshot().pid; pid > 0) pgids.push_back(pid);
  }
  return pgids;
}

absl::Status Supervisor::AddJob(JobSpec spec) {
  if (jobs_.count(spec.name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("job \"", spec.name, "\" already exists"));
  }
  const std::string name = spec.name;
  jobs_.emplace(name, MakeJob(std::move(spec)));
  return absl::OkStatus();
}

absl::StatusOr<JobSnapshot> Supervisor::SubmitAndStart(JobSpec spec, const std::string& reason,
                                                       std::string spec_yaml, std::optional<Caller> caller) {
  const std::string name = spec.name;
  if (caller && !caller->root()) {
    // Whoever can reach the socket must not get root from it: a non-root
    // caller's job runs as that caller.
    if (spec.user.empty()) spec.user = std::to_string(caller->uid);
    if (spec.group.empty()) spec.group = std::to_string(caller->gid);
  }
  if (absl::Status s = CheckSubmission(spec, spec_yaml, caller); !s.ok()) return s;
  if (spec.gang) {
    // Every other worker runs the published spec as the identity admitted
    // here, never as its own tpud: a job root submitted without a user runs
    // as tpud's own uid, and says so.
    if (spec.user.empty()) spec.user = std::to_string(::geteuid());
    if (spec.group.empty()) spec.group = std::to_string(::getegid());
    absl::StatusOr<std::string> stamped = JobSpecYamlWithIdentity(spec_yaml, spec.user, spec.group);
    if (!stamped.ok()) return stamped.status();
    spec_yaml = *std::move(stamped);
  }
  auto it = jobs_.find(name);
  std::unique_ptr<Job> added;
  if (it == jobs_.end()) {
    added = MakeJob(std::move(spec));
  } else if (IsActive(it->second->state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", name, "\" is ", JobStateName(it->second->state()), "; stop it before replacing its spec"));
  } else if (absl::Status s = CheckOwner(*it->second, caller); !s.ok()) {
    return s;
  }
  Job& job = added ? *added : *it->second;
  const std::string previous_yaml = spec_yaml_.count(name) ? spec_yaml_[name] : "";
  spec_yaml_[name] = std::move(spec_yaml);
  std::optional<JobSpec> previous_spec;
  if (!added) previous_spec = job.spec();
  if (!added) job.UpdateSpec(ForThisWorker(std::move(spec)));
  if (absl::Status s = CommitIntent(job, true); !s.ok()) {  // Nothing changes when it cannot be recorded.
    if (previous_spec) job.UpdateSpec(std::move(*previous_spec));
    if (added || previous_yaml.empty()) spec_yaml_.erase(name);
    if (!added && !previous_yaml.empty()) spec_yaml_[name] = previous_yaml;
    return s;
  }
  if (added) it = jobs_.emplace(name, std::move(added)).first;
  // A gang spec goes to every worker of the slice; each runs it.
  if (it->second->spec().gang && deps_.gang != nullptr) deps_.gang->Publish(name, spec_yaml_[name]);
  if (absl::Status s = it->second->Start(reason); !s.ok()) return s;
  return it->second->Snapshot();
}

absl::Status Supervisor::AdoptGangSpec(JobSpec spec, std::string spec_yaml) {
  if (auto it = jobs_.find(spec.name); it != jobs_.end()) {
    Job& known = *it->second;
    const auto yaml = spec_yaml_.find(spec.name);
    // A configured job keeps its config (every worker has the file); the
    // same spec again (this worker's own submission, a rejoin) is nothing.
    if (yaml == spec_yaml_.end() || yaml->second == spec_yaml) return absl::OkStatus();
    if (!known.spec().gang) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", spec.name, "\" here is not a gang job; the gang spec from the slice is not applied"));
    }
    // Resubmitted on another worker: every worker runs the new spec, from
    // its next attempt on (the gang's next generation).
    std::string previous_yaml = std::exchange(yaml->second, std::move(spec_yaml));
    JobSpec previous_spec = known.spec();
    spec.origin = previous_spec.origin;
    known.UpdateSpec(ForThisWorker(std::move(spec)));
    if (absl::Status s = CommitIntent(known, known.wants_running()); !s.ok()) {
      known.UpdateSpec(std::move(previous_spec));
      spec_yaml_[known.spec().name] = std::move(previous_yaml);
      return s;
    }
    spdlog::info("job {}: new gang spec from the slice; it applies from the next attempt", known.spec().name);
    return absl::OkStatus();
  }
  const std::string name = spec.name;
  std::unique_ptr<Job> job = MakeJob(std::move(spec));
  spec_yaml_[name] = std::move(spec_yaml);
  if (absl::Status s = CommitIntent(*job, false); !s.ok()) {  // The gang's commits say when it runs.
    spec_yaml_.erase(name);
    return s;
  }
  jobs_.emplace(name, std::move(job));
  return absl::OkStatus();
}

absl::Status Supervisor::CheckSubmission(const JobSpec& spec, const std::string& spec_yaml,
                                         const std::optional<Caller>& caller) const {
  if (spec.gang && deps_.gang == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", spec.name, "\" is a gang job (gang: true), but this tpud has no slice: section; a gang runs on "
        "every worker of a multi-host slice, agreed through etcd"));
  }
  if (caller && !caller->root()) {
    absl::StatusOr<uid_t> uid = LookUpUid(spec.user);
    if (!uid.ok() || *uid != caller->uid) {
      return absl::PermissionDeniedError(absl::StrCat("uid ", caller->uid, " may only submit jobs that run as "
                                                      "itself, not as user \"", Truncated(spec.user), "\""));
    }
    absl::StatusOr<gid_t> gid = LookUpGroup(spec.group);
    const bool member = gid.ok() && (*gid == caller->gid || std::find(caller->groups.begin(), caller->groups.end(),
                                                                      *gid) != caller->groups.end());
    if (!member) {
      return absl::PermissionDeniedError(
          absl::StrCat("uid ", caller->uid, " is not in group \"", Truncated(spec.group), "\""));
    }
  }
  std::size_t count = 1, bytes = spec_yaml.size();
  for (const auto& [name, yaml] : spec_yaml_) {
    if (name == spec.name) continue;
    ++count;
    bytes += yaml.size();
  }
  if (count > options_.max_submitted_jobs || bytes > options_.max_submitted_spec_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many submitted jobs (at most ", options_.max_submitted_jobs, " with ", options_.max_submitted_spec_bytes,
        " bytes of specs in all); remove some with tpuctl remove NAME"));
  }
  return absl::OkStatus();
}

absl::Status Supervisor::CheckOwner(const Job& job, const std::optional<Caller>& caller) const {
  if (!caller || caller->root()) return absl::OkStatus();
  absl::StatusOr<uid_t> owner = job.spec().user.empty() ? absl::StatusOr<uid_t>(0) : LookUpUid(job.spec().user);
  if (owner.ok() && *owner == caller->uid && spec_yaml_.count(job.spec().name) != 0) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("job \"", job.spec().name, "\" is not uid ", caller->uid,
                                                  "'s: only its owner or root may replace or remove it"));
}

absl::Status Supervisor::RemoveSubmittedJob(const std::string& name, std::optional<Caller> caller) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("unknown job \"", Truncated(name), "\""));
  const Job& job = *it->second;
  if (spec_yaml_.count(name) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("job \"", name, "\" comes from the config (",
                                                      job.spec().origin, "); remove it there and reload"));
  }
  if (IsActive(job.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job \"", name, "\" is ", JobStateName(job.state()), "; stop it before removing it"));
  }
  if (absl::Status s = CheckOwner(job, caller); !s.ok()) return s;
  if (deps_.store != nullptr) {
    absl::Status deleted = NoteStore(deps_.store->DeleteJob(name, /*with_history=*/true), "delete job " + name);
    if (deleted.ok()) deleted = NoteStore(deps_.store->Sync(), "sync");
    if (!deleted.ok()) {
      return absl::UnavailableError(absl::StrCat("state store: ", deleted.message(), "; job \"", name,
                                                 "\" not removed"));
    }
  }
  jobs_.erase(it);
  spec_yaml_.erase(name);
  if (deps_.retire_incidents) deps_.retire_incidents(name);
  std::erase_if(history_, [&](const NumberedEvent& event) { return event.job() == name; });
  return absl::OkStatus();
}

void Supervisor::StartAutostartJobs() {
  for (auto& [name, job] : jobs_) {
    // A job an earlier tpud knew keeps the state it had (the person may have stopped it).
    if (job->spec().autostart && !IsActive(job->state()) && restored_.count(name) == 0) {
      (void)job->Start("autostart");
    }
  }
}

Job* Supervisor::FindJob(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second.get();
}

absl::Status Supervisor::ReplaceJobSpec(JobSpec spec) {
  absl::StatusOr<Job*> job = Find(spec.name);
  if (!job.ok()) return job.status();
  spec_yaml_.erase(spec.name);  // Now the config's, not a submitted spec.
  (*job)->UpdateSpec(ForThisWorker(std::move(spec)));
  PersistJob(**job);
  return Durable(absl::OkStatus());
}

absl::Status Supervisor::RemoveJob(const std::string& name) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("unknown job \"", Truncated(name), "\""));
  if (IsActive(it->second->state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job \"", name, "\" is ", JobStateName(it->second->state()), "; stop it before removing it"));
  }
  jobs_.erase(it);
  spec_yaml_.erase(name);
  if (deps_.retire_incidents) deps_.retire_incidents(name);
  if (deps_.store != nullptr) {
    if (absl::Status s = deps_.store->DeleteJob(name); !s.ok()) {
      spdlog::error("job {}: stored record not deleted: {}", name, std::string(s.message()));
    }
  }
  return Durable(absl::OkStatus());
}

absl::StatusOr<Job*> Supervisor::Find(const std::string& name) const {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("unknown job \"", Truncated(name), "\""));
  return it->second.get();
}

absl::StatusOr<JobSnapshot> Supervisor::Start(const std::string& name, const std::string& reason) {
  absl::StatusOr<Job*> job = Find(name);
  if (!job.ok()) return job.status();
  if (IsActive((*job)->state())) return (*job)->Start(reason);  // The "already active" error.
  if (absl::Status s = CommitIntent(**job, true); !s.ok()) return s;
  if (absl::Status s = (*job)->Start(reason); !s.ok()) return s;
  return (*job)->Snapshot();
}

absl::StatusOr<JobSnapshot> Supervisor::Stop(const std::string& name, const std::string& reason) {
  absl::StatusOr<Job*> job = Find(name);
  if (!job.ok()) return job.status();
  if (absl::Status s = CommitIntent(**job, false); !s.ok()) return s;
  if (absl::Status s = (*job)->Stop(reason); !s.ok()) return s;
  return (*job)->Snapshot();
}

absl::StatusOr<JobSnapshot> Supervisor::Restart(const std::string& name, const std::string& reason) {
  absl::StatusOr<Job*> job = Find(name);
  if (!job.ok()) return job.status();
  if (absl::Status s = CommitIntent(**job, true); !s.ok()) return s;
  if (absl::Status s = (*job)->Restart(reason); !s.ok()) return s;
  return (*job)->Snapshot();
}

absl::StatusOr<JobSnapshot> Supervisor::Get(const std::string& name) const {
  absl::StatusOr<Job*> job = Find(name);
  if (!job.ok()) return job.status();
  return (*job)->Snapshot();
}

std::vector<JobSnapshot> Supervisor::List() const {
  std::vector<JobSnapshot> out;
  out.reserve(jobs_.size());
  for (const auto& [name, job] : jobs_) out.push_back(job->Snapshot());
  return out;
}

void Supervisor::StopAll(const std::string& reason, std::function<void()> done) {
  stop_all_done_ = std::move(done);
  for (auto& [name, job] : jobs_) job->StopForShutdown(reason);
  CheckStopAllDone();
}

void Supervisor::CheckStopAllDone() {
  if (!stop_all_done_) return;
  for (const auto& [name, job] : jobs_) {
    if (!job->stopped_for_shutdown()) return;
  }
  std::exchange(stop_all_done_, nullptr)();
}

std::vector<NumberedEvent> Supervisor::EventHistory(const std::string& job, std::size_t max) const {
  std::vector<NumberedEvent> out;
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (max != 0 && out.size() >= max) break;
    if (job.empty() || it->job() == job) out.push_back(*it);
  }
  return {out.rbegin(), out.rend()};
}

std::filesystem::path Supervisor::LogPath(const std::string& name) const {
  return options_.log_dir / (name + ".log");
}

void Supervisor::OnJobUpdated(const std::string& job) {
  if (const Job* found = FindJob(job)) PersistJob(*found);
}

void Supervisor::Record(const std::string& job, SupervisorEvent event) {
  NumberedEvent numbered{next_sequence_++, std::move(event)};
  history_.push_back(numbered);
  while (history_.size() > options_.event_history) history_.pop_front();
  events_.Publish(job, numbered, 1);
}

void Supervisor::OnJobEvent(const JobEvent& event) {
  JobEvent numbered = event;
  numbered.sequence = next_sequence_;
  spdlog::info("job {}: {} -> {} (attempt {}): {}", event.job, JobStateName(event.from),
               JobStateName(event.to), event.attempt, event.reason);
  Record(event.job, numbered);
  if (Job* job = FindJob(event.job)) PersistJob(*job);
  PersistEvent(event);
  if (stop_all_done_) CheckStopAllDone();  // A gang worker is done in BACKOFF.
}

void Supervisor::OnIncident(const Incident& incident) {
  if (!incident.open) {
    spdlog::info("job {}: incident {} closed: {} ({}), {}", incident.job, incident.id,
                 FailureClassName(incident.failure.failure_class), incident.failure.rule, incident.outcome);
  }
  Record(incident.job, incident);
  PersistIncident(incident);
}

void Supervisor::OnMetadataChange(const std::string& key, const std::string& value) {
  const bool notice = (key.ends_with("maintenance-event") && value != "NONE") ||
                      (key.ends_with("preempted") && value == "TRUE");
  const bool was_active = maintenance_active();
  if (notice) {
    maintenance_[key] = value;
  } else {
    maintenance_.erase(key);
  }
  spdlog::info("metadata {} = {}{}", key, value, notice ? ": notifying running jobs" : "");
  if (notice) {
    for (auto& [name, job] : jobs_) job->OnMaintenanceNotice(absl::StrCat(key, "=", value));
  } else if (was_active && !maintenance_active()) {
    for (auto& [name, job] : jobs_) job->OnMaintenanceOver();
  }
}

void Supervisor::OnJobOutputLines(const std::string& job, std::string_view lines) {
  if (!output_.HasReaders()) return;  // Nobody follows a log: no copy at all.
  output_.Publish(job, std::string(lines), lines.size());
}

}  // namespace tpud
