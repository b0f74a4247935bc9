#include "daemon/slice/coordinator.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <fstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tpud::slice {
namespace {

// Keeps `value` as the job's value to write, unless it is what was written last.
template <typename T>
void Latest(std::map<std::string, T>& pending, const std::map<std::string, T>& written, const std::string& job,
            T value) {
  const auto last = written.find(job);
  if (last == written.end() || !(last->second == value)) {
    pending[job] = std::move(value);
  } else {
    pending.erase(job);
  }
}

using etcd::Compare;
using etcd::TxnOp;

constexpr int kMaxCasRounds = 5;  // Re-reads of one generation key per pass before trying later.

}  // namespace

Coordinator::Coordinator(etcd::EtcdClient& etcd, CoordinatorOptions options, CoordinatorHooks hooks)
    : etcd_(etcd),
      options_(std::move(options)),
      hooks_(std::move(hooks)),
      keys_(options_.prefix, options_.slice),
      pending_(options_.state_dir.empty() ? std::filesystem::path() : options_.state_dir / "slice-proposals.json") {}

Coordinator::~Coordinator() { Stop(); }

void Coordinator::Start() {
  if (thread_.joinable()) return;
  ResumePendingProposals();
  thread_ = std::thread([this] { Run(); });
}

// A stop or leave a previous tpud made and etcd never got: proposed again,
// first, so the gang does not start here what a person stopped.
void Coordinator::ResumePendingProposals() {
  absl::StatusOr<std::vector<PendingProposal>> kept = pending_.Load();
  if (!kept.ok()) {
    SPDLOG_ERROR("slice {}: {}; a stop made before this tpud started may not reach the gang: check the job with "
                 "tpuctl status and stop it again",
                 options_.slice, std::string(kept.status().message()));
    return;
  }
  for (const PendingProposal& p : *kept) {
    SPDLOG_INFO("slice {}: job {}: proposing again what worker {} proposed before its tpud restarted: {}",
                options_.slice, p.job, p.proposal.worker, p.proposal.reason);
    Input input(Input::kProposal);
    input.job = p.job;
    input.proposal = p.proposal;
    Enqueue(std::move(input));
  }
}

void Coordinator::Stop() {
  {
    absl::MutexLock lock(&inputs_mu_);
    stopping_ = true;
  }
  reset_cancel_.Cancel();
  if (thread_.joinable()) thread_.join();
  if (watcher_) watcher_->Stop();
  if (keepalive_) keepalive_->Stop();
  watcher_.reset();
  keepalive_.reset();
}

bool Coordinator::HasInputs() const { return stopping_ || !inputs_.empty(); }

bool Coordinator::EtcdReachable() const {
  absl::MutexLock lock(&view_mu_);
  return etcd_up_;
}

void Coordinator::Enqueue(Input input) {
  absl::MutexLock lock(&inputs_mu_);
  inputs_.push_back(std::move(input));
}

void Coordinator::Propose(const std::string& job, const GangProposal& proposal) {
  // Durable before it is sent: this tpud may exit before etcd answers.
  if (absl::Status kept = pending_.Add(job, proposal); !kept.ok()) {
    SPDLOG_ERROR("slice {}: job {}: {}: this proposal ({}) is lost if tpud exits before etcd has it",
                 options_.slice, job, std::string(kept.message()), proposal.reason);
  }
  Input input(Input::kProposal);
  input.job = job;
  input.proposal = proposal;
  Enqueue(std::move(input));
}

void Coordinator::Report(const std::string& job, const GangReport& report) {
  Input input(Input::kReport);
  input.job = job;
  input.report = report;
  Enqueue(std::move(input));
}

void Coordinator::Join(const std::string& job) {
  Input input(Input::kJoin);
  input.job = job;
  Enqueue(std::move(input));
}

void Coordinator::Publish(const std::string& job, const std::string& spec_yaml) {
  Input input(Input::kPublish);
  input.job = job;
  input.spec_yaml = spec_yaml;
  Enqueue(std::move(input));
}

void Coordinator::AttemptChanged(const std::string& job, int attempt, int pid, std::int64_t generation) {
  Input input(Input::kAttempt);
  input.job = job;
  if (pid > 0) {
    AttemptRecord record;
    record.worker = options_.worker_id;
    record.host = options_.host;
    record.state_dir = options_.state_dir.string();
    record.pid = pid;
    record.attempt = attempt;
    record.generation = generation;
    record.started_unix_ms = NowUnixMs();
    input.attempt = record;
  }
  Enqueue(std::move(input));
}

// This tpud or one of its restarts: the same host and state_dir (a restart
// keeps both, and its attempts with them).
bool Coordinator::IsThisTpud(const std::string& host, const std::string& state_dir) const {
  return host == options_.host && state_dir == options_.state_dir.string();
}

std::string Coordinator::AttemptHeldElsewhere(const std::string& job) const {
  absl::MutexLock lock(&view_mu_);
  const auto gang = gangs_.find(job);
  if (gang == gangs_.end()) return "";
  const auto held = gang->second.attempts.find(options_.worker_id);
  if (held == gang->second.attempts.end()) return "";
  const AttemptRecord& r = held->second;
  if (IsThisTpud(r.host, r.state_dir)) return "";  // Ours (a restart).
  return absl::StrCat("worker ", options_.worker_id, "'s attempt ", r.attempt, " (pid ", r.pid,
                      ") is recorded as running under the tpud on ", r.host, " (state_dir ", r.state_dir,
                      "): it must end first. Start tpud there (not a member, it stops the attempt), or if that "
                      "machine is gone: etcdctl del ",
                      keys_.attempt(job, options_.worker_id));
}

void Coordinator::PublishStatus(const std::string& job, const WorkerJobStatus& status) {
  Input input(Input::kStatus);
  input.job = job;
  input.status = status;
  Enqueue(std::move(input));
}

void Coordinator::PublishEvents(const std::string& job, const WorkerEvents& events) {
  Input input(Input::kEvents);
  input.job = job;
  input.events = events;
  Enqueue(std::move(input));
}

SliceView Coordinator::View() const {
  absl::MutexLock lock(&view_mu_);
  SliceView view;
  view.slice = options_.slice;
  view.worker_id = options_.worker_id;
  view.num_workers = options_.num_workers;
  view.etcd_up = etcd_up_;
  view.etcd_error = etcd_error_;
  view.etcd_down_since_unix_ms = etcd_down_since_unix_ms_;
  view.member_conflict = member_conflict_;
  view.config_conflict = ConfigConflict(options_.worker_id, options_.num_workers, members_);
  view.leader = leader_;
  view.members = members_;
  view.gang_restarts = gang_restarts_;
  for (const auto& [job, gang] : gangs_) {
    view.gangs.push_back(
        SliceView::Gang{job, gang.record, gang.reports, gang.statuses, gang.waiting_for, gang.events});
  }
  return view;
}

std::int64_t Coordinator::NowUnixMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Coordinator::Run() {
  for (;;) {
    std::deque<Input> inputs;
    bool stopping = false;
    {
      absl::MutexLock lock(&inputs_mu_);
      inputs_mu_.AwaitWithTimeout(absl::Condition(this, &Coordinator::HasInputs), absl::FromChrono(options_.tick));
      inputs.swap(inputs_);
      stopping = stopping_;
    }
    if (stopping) {
      Drain(inputs);
      if (!proposals_.empty() && keepalive_ && EtcdReachable()) FlushProposals();
      if (!attempt_writes_.empty() && keepalive_ && EtcdReachable()) FlushAttempts();
      return;
    }
    Drain(inputs);
    if (!EnsureSession()) {
      if (keepalive_ && keepalive_->alive() && !member_written_) FlushAttempts();  // Not a member: its own record.
      continue;
    }
    Deliver();
    bool ok = FlushAttempts() && FlushSpecs() && FlushReports() && FlushProposals() && Elect() && FlushStatuses();
    // A session (lease kept alive, watch running) and every write through:
    // etcd is back, also when the watch resumed by itself and nothing had
    // to be loaded again.
    if (ok) EtcdUp();
    if (ok) Lead();
    Deliver();
  }
}

void Coordinator::EtcdDown(const absl::Status& status) {
  absent_since_.clear();  // Absences are counted again from when etcd answers.
  absl::MutexLock lock(&view_mu_);
  if (etcd_up_ || etcd_error_ != status.message()) {
    SPDLOG_WARN("slice {}: etcd: {}; training goes on, gang work waits for etcd", options_.slice,
                std::string(status.message()));
  }
  if (etcd_up_ || etcd_down_since_unix_ms_ == 0) etcd_down_since_unix_ms_ = NowUnixMs();
  etcd_up_ = false;
  etcd_error_ = std::string(status.message());
}

// --- session: lease, member key, watch ---

std::optional<std::int64_t> Coordinator::LoadLease() const {
  if (options_.state_dir.empty()) return std::nullopt;
  std::ifstream in(options_.state_dir / "slice-lease");
  std::string text;
  std::int64_t id = 0;
  if (!(in >> text) || !absl::SimpleAtoi(text, &id) || id == 0) return std::nullopt;
  return id;
}

void Coordinator::PersistLease() const {
  if (options_.state_dir.empty()) return;
  const std::filesystem::path path = options_.state_dir / "slice-lease";
  const std::filesystem::path tmp = options_.state_dir / "slice-lease.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << lease_.id << "\n";
    if (!out.flush()) {
      SPDLOG_WARN("slice {}: cannot write {}: a tpud restart will join with a new lease", options_.slice,
                  tmp.string());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) SPDLOG_WARN("slice {}: cannot write {}: {}", options_.slice, path.string(), ec.message());
}

bool Coordinator::EnsureSession() {
  if (!keepalive_ || !keepalive_->alive()) {
    keepalive_.reset();
    member_written_ = false;
    std::optional<etcd::Lease> lease;
    if (lease_.id == 0) {
      // A restarted tpud takes over the lease its predecessor kept alive.
      if (std::optional<std::int64_t> kept = LoadLease()) {
        absl::StatusOr<etcd::LeaseTimeToLive> ttl = etcd_.TimeToLive(*kept);
        if (ttl.ok() && ttl->remaining.count() > 0) {
          lease = etcd::Lease{*kept, ttl->granted};
          SPDLOG_INFO("slice {}: worker {} rejoins with its lease {:x} ({} s left)", options_.slice,
                      options_.worker_id, *kept, ttl->remaining.count());
        } else if (!ttl.ok() && ttl.status().code() != absl::StatusCode::kNotFound) {
          EtcdDown(ttl.status());
          return false;
        }
      }
    }
    if (!lease) {
      absl::StatusOr<etcd::Lease> granted = etcd_.GrantLease(options_.lease_ttl);
      if (!granted.ok()) {
        EtcdDown(granted.status());
        return false;
      }
      lease = *granted;
    }
    lease_ = *lease;
    PersistLease();
    // A new session reads the slice again: the lease was lost, maybe with
    // etcd's data (wiped or restored, its revisions rewound), and a watch
    // resumed at the old revision would deliver nothing.
    watcher_.reset();
    absl::StatusOr<std::unique_ptr<etcd::LeaseKeepAlive>> keepalive =
        etcd_.KeepAlive(lease_, [this](std::int64_t lease, const absl::Status& why) {
          SPDLOG_WARN("slice {}: worker {} lost its lease: {}; joining again", options_.slice, options_.worker_id,
                      std::string(why.message()));
          Input input(Input::kLeaseLost);
          input.source = lease;
          Enqueue(std::move(input));
        });
    if (!keepalive.ok()) {
      EtcdDown(keepalive.status());
      return false;
    }
    keepalive_ = *std::move(keepalive);
  }
  if (!member_written_ && !ClaimMember()) return false;
  if (!watcher_ || !watcher_->running()) return Load();
  return true;
}

// Writes this worker's member key, unless another live tpud holds its worker
// id: its key is on a lease other than ours (keys on an expired lease are
// gone), and it is not a predecessor of ours (this host, this state_dir) that
// has exited.
bool Coordinator::ClaimMember() {
  const auto now = std::chrono::steady_clock::now();
  if (now < claim_retry_at_) return false;
  MemberRecord member;
  member.worker = options_.worker_id;
  member.host = options_.host;
  member.version = TPUD_VERSION;
  member.pid = getpid();
  member.joined_unix_ms = NowUnixMs();
  member.state_dir = options_.state_dir.string();
  member.num_workers = options_.num_workers;
  const std::string key = keys_.member(options_.worker_id);
  etcd::Txn claim;
  claim.If(Compare::CreateRevision(key, Compare::kEqual, 0))
      .Then(TxnOp::Put(key, EncodeMember(member), lease_.id))
      .Else(TxnOp::Get(key));
  absl::StatusOr<etcd::TxnResult> claimed = etcd_.Commit(claim);
  if (!claimed.ok()) {
    EtcdDown(claimed.status());
    return false;
  }
  if (!claimed->succeeded && !claimed->results.empty() && !claimed->results[0].kvs.empty()) {
    const etcd::KeyValue& held = claimed->results[0].kvs[0];
    const absl::StatusOr<MemberRecord> holder = DecodeMember(held.value);
    // A predecessor is this tpud's earlier run: same host and same
    // state_dir (which holds its attempts). Another tpud configured with
    // the same worker id waits for the key's lease to expire instead.
    const bool predecessor = holder.ok() && IsThisTpud(holder->host, holder->state_dir);
    const bool ours = held.lease == lease_.id ||
                      (predecessor &&
                       (holder->pid == getpid() || (kill(static_cast<pid_t>(holder->pid), 0) != 0 && errno == ESRCH)));
    if (!ours) {
      const std::string conflict =
          holder.ok() ? absl::StrCat("worker ", options_.worker_id, " is already held by the tpud on ", holder->host,
                                     " (pid ", holder->pid, ", tpud ", holder->version,
                                     "): this tpud does not join the slice while that one is a member; give each "
                                     "worker its own slice.worker_id")
                      : absl::StrCat("worker ", options_.worker_id, " is already held (", held.key,
                                     " is on another lease): this tpud does not join the slice while it is there");
      absl::MutexLock lock(&view_mu_);
      if (member_conflict_ != conflict) {
        SPDLOG_ERROR("slice {}: {}", options_.slice, conflict);
        PostMembership(conflict);
      }
      member_conflict_ = conflict;
      etcd_up_ = true;
      etcd_down_since_unix_ms_ = 0;
      claim_retry_at_ = now + kClaimRetry;
      return false;
    }
    // Ours from a lease we no longer keep, or a predecessor's that exited: replace it.
    absl::StatusOr<std::int64_t> put = etcd_.Put(key, EncodeMember(member), lease_.id);
    if (!put.ok()) {
      EtcdDown(put.status());
      return false;
    }
  }
  member_written_ = true;
  {
    absl::MutexLock lock(&view_mu_);
    if (!member_conflict_.empty()) {
      SPDLOG_INFO("slice {}: worker {} is free again", options_.slice, options_.worker_id);
      PostMembership("");
    }
    member_conflict_.clear();
  }
  SPDLOG_INFO("slice {}: worker {} of {} joined (lease {:x}, {} s)", options_.slice, options_.worker_id,
              options_.num_workers, lease_.id, lease_.ttl.count());
  return true;
}

void Coordinator::PostMembership(const std::string& conflict) {
  if (hooks_.on_membership) hooks_.post([this, conflict] { hooks_.on_membership(conflict); });
}

// Reads the whole slice, then follows it from the next revision.
bool Coordinator::Load() {
  watcher_.reset();
  absl::StatusOr<etcd::RangeResult> all = etcd_.GetPrefix(keys_.root);
  if (!all.ok()) {
    EtcdDown(all.status());
    return false;
  }
  {
    absl::MutexLock lock(&view_mu_);
    members_.clear();
    leader_.reset();
    leader_lease_ = 0;
    for (auto& [job, gang] : gangs_) {
      gang.spec.reset();
      gang.record.reset();
      gang.record_mod_revision = 0;
      gang.reports.clear();
      gang.statuses.clear();
      gang.events.clear();
      // Attempts stay until the read below says otherwise: a launch on the
      // loop meanwhile must not see a worker id free that is not.
    }
  }
  statuses_written_.clear();  // Written again: etcd may have lost them.
  events_written_.clear();
  max_revision_ = all->revision;
  std::set<std::pair<std::string, int>> recorded;
  for (const etcd::KeyValue& kv : all->kvs) {
    ApplyPut(kv);
    const auto gang_key = keys_.GangKeyOf(kv.key);
    int worker = -1;
    if (gang_key && gang_key->second.rfind("attempts/", 0) == 0 &&
        absl::SimpleAtoi(gang_key->second.substr(9), &worker)) {
      recorded.emplace(gang_key->first, worker);
    }
  }
  {
    absl::MutexLock lock(&view_mu_);
    for (auto& [job, gang] : gangs_) {
      std::erase_if(gang.attempts, [&, &job = job](const auto& a) { return recorded.count({job, a.first}) == 0; });
    }
    // Our member key deleted before this read (an old lease's revocation
    // after an etcd pause, a wipe): no watch event will say so, so claim it
    // again on the next pass instead of staying "joined" without a key.
    if (members_.count(options_.worker_id) == 0) member_written_ = false;
  }
  etcd::WatchOptions watch;
  watch.key = keys_.root;
  watch.prefix = true;
  watch.start_revision = all->revision + 1;
  const std::int64_t epoch = ++watch_epoch_;
  absl::StatusOr<std::unique_ptr<etcd::Watcher>> watcher =
      etcd_.Watch(watch, [this, epoch](const etcd::WatchUpdate& u) {
        Input input(Input::kWatch);
        input.source = epoch;
        input.update = u;
        Enqueue(std::move(input));
      });
  if (!watcher.ok()) {
    EtcdDown(watcher.status());
    return false;
  }
  watcher_ = *std::move(watcher);
  EtcdUp();
  return true;
}

// etcd's revision only grows; one lower than seen before means its data was
// wiped or restored from a snapshot. The watch, which resumes at the old
// revision, would then deliver nothing: read the slice again.
void Coordinator::NoteRevision(std::int64_t revision) {
  if (revision <= 0) return;
  if (revision < max_revision_) {
    SPDLOG_WARN("slice {}: etcd's revision went back from {} to {}: its data was wiped or restored; reading the "
                "slice again",
                options_.slice, max_revision_, revision);
    watcher_.reset();
  }
  max_revision_ = revision;
}

void Coordinator::EtcdUp() {
  absl::MutexLock lock(&view_mu_);
  if (etcd_up_) return;
  SPDLOG_INFO("slice {}: etcd reachable", options_.slice);
  etcd_up_ = true;
  etcd_down_since_unix_ms_ = 0;
  etcd_error_.clear();
}

void Coordinator::Drain(std::deque<Input>& inputs) {
  for (Input& input : inputs) {
    switch (input.kind) {
      case Input::kProposal:
        proposals_.emplace_back(input.job, std::move(input.proposal));
        break;
      case Input::kReport:
        reports_[input.job] = input.report;
        break;
      case Input::kAttempt:
        attempt_writes_[input.job] = input.attempt;
        break;
      case Input::kJoin: {
        absl::MutexLock lock(&view_mu_);
        gangs_[input.job].delivered.reset();  // Deliver the current commit again.
        break;
      }
      case Input::kPublish:
        specs_[input.job] = std::move(input.spec_yaml);
        break;
      case Input::kStatus:
        Latest(statuses_, statuses_written_, input.job, std::move(input.status));
        break;
      case Input::kEvents:
        Latest(events_, events_written_, input.job, std::move(input.events));
        break;
      case Input::kLeaseLost:
        if (input.source != lease_.id) break;  // An earlier lease's: this one is kept alive.
        if (keepalive_) keepalive_->Stop();
        absent_since_.clear();
        break;
      case Input::kWatch: {
        // An earlier watch's update, queued before the Load that replaced
        // it: that Load read past it (a lease revocation's delete applied
        // now would drop a member that claimed its key again).
        if (input.source != watch_epoch_ || !watcher_) break;
        const etcd::WatchUpdate& u = input.update;
        if (u.kind != etcd::WatchUpdate::kEvents) {
          SPDLOG_WARN("slice {}: watch ended ({}); reading the slice again", options_.slice,
                      u.kind == etcd::WatchUpdate::kCompacted ? "compacted" : u.reason);
          watcher_.reset();  // EnsureSession loads again.
          break;
        }
        for (const etcd::WatchEvent& event : u.events) {
          if (event.type == etcd::WatchEvent::kPut) {
            ApplyPut(event.kv);
          } else {
            ApplyDelete(event.kv);
          }
        }
        break;
      }
    }
  }
}

void Coordinator::ApplyPut(const etcd::KeyValue& kv) {
  absl::MutexLock lock(&view_mu_);
  if (std::optional<int> worker = keys_.MemberOf(kv.key)) {
    absl::StatusOr<MemberRecord> member = DecodeMember(kv.value);
    if (member.ok()) members_[*worker] = *member;
    return;
  }
  if (kv.key == keys_.leader()) {
    int worker = -1;
    if (absl::SimpleAtoi(kv.value, &worker)) {
      leader_ = worker;
      leader_lease_ = kv.lease;
      if (worker == options_.worker_id) leader_create_revision_ = kv.create_revision;
    }
    return;
  }
  std::optional<std::pair<std::string, std::string>> gang_key = keys_.GangKeyOf(kv.key);
  if (!gang_key) return;
  GangState& gang = gangs_[gang_key->first];
  const std::string& what = gang_key->second;
  if (what == "spec") {
    gang.spec = kv.value;
  } else if (what == "generation") {
    if (kv.mod_revision < gang.record_mod_revision) return;  // Older than what a Txn already showed.
    absl::StatusOr<GenerationRecord> record = DecodeGeneration(kv.value);
    if (!record.ok()) {
      SPDLOG_ERROR("slice {}: {}: {}", options_.slice, kv.key, std::string(record.status().message()));
      return;
    }
    gang.record = *record;
    gang.record_mod_revision = kv.mod_revision;
  } else if (what.rfind("reports/", 0) == 0) {
    absl::StatusOr<GangReport> report = DecodeReport(kv.value);
    if (report.ok()) gang.reports[report->worker] = *report;
  } else if (what.rfind("status/", 0) == 0) {
    absl::StatusOr<WorkerJobStatus> status = DecodeStatus(kv.value);
    if (status.ok()) gang.statuses[status->worker] = *status;
  } else if (what.rfind("events/", 0) == 0) {
    absl::StatusOr<WorkerEvents> events = DecodeEvents(kv.value);
    if (events.ok()) gang.events[events->worker] = *std::move(events);
  } else if (what.rfind("attempts/", 0) == 0) {
    absl::StatusOr<AttemptRecord> attempt = DecodeAttempt(kv.value);
    if (attempt.ok()) gang.attempts[attempt->worker] = *std::move(attempt);
  }
}

void Coordinator::ApplyDelete(const etcd::KeyValue& kv) {
  absl::MutexLock lock(&view_mu_);
  if (std::optional<int> worker = keys_.MemberOf(kv.key)) {
    members_.erase(*worker);
    // Ours, deleted under a lease still alive (etcd's data wiped, or a
    // person's etcdctl del): claimed again on the next pass.
    if (*worker == options_.worker_id) member_written_ = false;
    return;
  }
  if (kv.key == keys_.leader()) {
    leader_.reset();
    leader_lease_ = 0;
    return;
  }
  std::optional<std::pair<std::string, std::string>> gang_key = keys_.GangKeyOf(kv.key);
  if (!gang_key) return;
  GangState& gang = gangs_[gang_key->first];
  const std::string& what = gang_key->second;
  if (what == "spec") gang.spec.reset();
  if (what == "generation") {
    gang.record.reset();
    gang.record_mod_revision = 0;
  }
  int worker = -1;
  if (what.rfind("reports/", 0) == 0 && absl::SimpleAtoi(what.substr(8), &worker)) gang.reports.erase(worker);
  if (what.rfind("status/", 0) == 0 && absl::SimpleAtoi(what.substr(7), &worker)) gang.statuses.erase(worker);
  if (what.rfind("events/", 0) == 0 && absl::SimpleAtoi(what.substr(7), &worker)) gang.events.erase(worker);
  if (what.rfind("attempts/", 0) == 0 && absl::SimpleAtoi(what.substr(9), &worker)) gang.attempts.erase(worker);
}

// Posts new specs, then new commits, to the loop.
void Coordinator::Deliver() {
  std::vector<std::pair<std::string, std::string>> specs;
  std::vector<std::pair<std::string, GangCommit>> commits;
  // A job with a stop not yet in etcd (one a previous tpud made, say) is not
  // told of an active generation meanwhile: it would start what was stopped.
  std::set<std::string> stop_pending;
  for (const auto& [job, proposal] : proposals_) {
    if (proposal.intent == GangProposal::Intent::kStop) stop_pending.insert(job);
  }
  {
    absl::MutexLock lock(&view_mu_);
    for (auto& [job, gang] : gangs_) {
      if (gang.spec && gang.spec != gang.delivered_spec) {
        gang.delivered_spec = gang.spec;
        specs.emplace_back(job, *gang.spec);
      }
      if (gang.record && gang.record->commit != gang.delivered && stop_pending.count(job) == 0) {
        gang.delivered = gang.record->commit;
        commits.emplace_back(job, gang.record->commit);
      }
    }
  }
  if (!hooks_.post) return;
  for (auto& [job, yaml] : specs) {
    if (hooks_.on_spec) hooks_.post([this, job = job, yaml = yaml] { hooks_.on_spec(job, yaml); });
  }
  for (auto& [job, commit] : commits) {
    if (hooks_.on_commit) hooks_.post([this, job = job, commit = commit] { hooks_.on_commit(job, commit); });
  }
}

// --- this worker's writes ---

bool Coordinator::FlushSpecs() {
  while (!specs_.empty()) {
    auto it = specs_.begin();
    absl::StatusOr<std::int64_t> put = etcd_.Put(keys_.spec(it->first), it->second);
    if (!put.ok()) {
      EtcdDown(put.status());
      return false;
    }
    specs_.erase(it);
  }
  return true;
}

template <typename T>
bool Coordinator::FlushLatest(std::map<std::string, T>& pending, std::map<std::string, T>& written,
                              std::string (Keys::*key)(const std::string&, int) const,
                              std::string (*encode)(const T&)) {
  while (!pending.empty()) {
    auto it = pending.begin();
    absl::StatusOr<std::int64_t> put = etcd_.Put((keys_.*key)(it->first, options_.worker_id), encode(it->second));
    if (!put.ok()) {
      EtcdDown(put.status());
      return false;
    }
    written[it->first] = std::move(it->second);
    pending.erase(it);
  }
  return true;
}

bool Coordinator::FlushStatuses() {
  return FlushLatest(statuses_, statuses_written_, &Keys::status, &EncodeStatus) &&
         FlushLatest(events_, events_written_, &Keys::events, &EncodeEvents);
}

// This worker's attempt records. Written also while this tpud is not a member
// (only its own key, on no lease): a tpud that stopped the attempt it kept
// after another took its worker id must clear the record the other waits on.
bool Coordinator::FlushAttempts() {
  while (!attempt_writes_.empty()) {
    auto it = attempt_writes_.begin();
    const std::string key = keys_.attempt(it->first, options_.worker_id);
    // Read, then write fenced on what was read: never over another tpud's
    // record (its attempt may run on), whatever this tpud's mirror holds.
    absl::StatusOr<etcd::RangeResult> held = etcd_.Get(key);
    if (!held.ok()) {
      EtcdDown(held.status());
      return false;
    }
    std::int64_t mod_revision = 0;
    if (!held->kvs.empty()) {
      absl::StatusOr<AttemptRecord> other = DecodeAttempt(held->kvs[0].value);
      const bool ours = other.ok() && IsThisTpud(other->host, other->state_dir);
      if (!ours) {
        SPDLOG_ERROR("slice {}: job {}: {} holds another tpud's attempt of worker {} ({}); this tpud's is not "
                     "recorded",
                     options_.slice, it->first, key, options_.worker_id, held->kvs[0].value);
        attempt_writes_.erase(it);
        continue;
      }
      mod_revision = held->kvs[0].mod_revision;
    } else if (!it->second) {
      attempt_writes_.erase(it);  // Nothing to clear.
      continue;
    }
    etcd::Txn txn;
    txn.If(Compare::ModRevision(key, Compare::kEqual, mod_revision));
    if (it->second) {
      txn.Then(TxnOp::Put(key, EncodeAttempt(*it->second)));
    } else {
      txn.Then(TxnOp::Delete(key));
    }
    absl::StatusOr<etcd::TxnResult> result = etcd_.Commit(txn);
    if (!result.ok()) {
      EtcdDown(result.status());
      return false;
    }
    NoteRevision(result->revision);
    if (result->succeeded) attempt_writes_.erase(it);  // Else it changed meanwhile: read again.
  }
  return true;
}

bool Coordinator::FlushReports() {
  while (!reports_.empty()) {
    auto it = reports_.begin();
    absl::StatusOr<std::int64_t> put =
        etcd_.Put(keys_.report(it->first, it->second.worker), EncodeReport(it->second));
    if (!put.ok()) {
      EtcdDown(put.status());
      return false;
    }
    NoteRevision(*put);
    SPDLOG_INFO("slice {}: job {}: worker {} stopped for generation {}, holding {} checkpoint step(s)",
                options_.slice, it->first, it->second.worker, it->second.generation, it->second.steps.size());
    reports_.erase(it);
  }
  return true;
}

bool Coordinator::FlushProposals() {
  while (!proposals_.empty()) {
    const auto& [job, proposal] = proposals_.front();
    bool done = false;
    for (int round = 0; round < kMaxCasRounds && !done; ++round) {
      std::optional<GenerationRecord> current;
      std::int64_t mod_revision = 0;
      {
        absl::MutexLock lock(&view_mu_);
        const GangState& gang = gangs_[job];
        current = gang.record;
        mod_revision = gang.record_mod_revision;
      }
      // etcd older than this worker (its data lost or restored from an old
      // snapshot): the proposal applies to this worker's generation, so
      // the gang goes on above what every worker has seen.
      const std::optional<GenerationRecord> basis = ProposalBasis(current, proposal);
      if (basis != current) {
        SPDLOG_WARN("slice {}: job {}: etcd's generation record ({}) is older than worker {}'s generation {}: "
                    "etcd lost data; {}",
                    options_.slice, job,
                    current ? absl::StrCat("generation ", current->commit.generation) : std::string("none"),
                    proposal.worker, proposal.base_generation, basis->commit.reason);
      }
      std::optional<GenerationRecord> next = ApplyProposal(basis, proposal, NowUnixMs());
      if (!next) {
        SPDLOG_INFO("slice {}: job {}: proposal of worker {} is moot: the gang is at generation {} ({})",
                    options_.slice, job, proposal.worker, current ? current->commit.generation : 0,
                    current ? GangPhaseName(current->commit.phase) : "none");
        done = true;
        break;
      }
      const std::string key = keys_.generation(job);
      etcd::Txn txn;
      txn.If(Compare::ModRevision(key, Compare::kEqual, mod_revision))
          .Then(TxnOp::Put(key, EncodeGeneration(*next)))
          .Else(TxnOp::Get(key));
      absl::StatusOr<etcd::TxnResult> result = etcd_.Commit(txn);
      if (!result.ok()) {
        EtcdDown(result.status());
        return false;  // Kept: retried when etcd answers (an unknown outcome re-reads first).
      }
      NoteRevision(result->revision);
      if (result->succeeded) {
        SPDLOG_INFO("slice {}: job {}: generation {} ({}): {}", options_.slice, job, next->commit.generation,
                    GangPhaseName(next->commit.phase), next->commit.reason);
        etcd::KeyValue kv;
        kv.key = key;
        kv.value = EncodeGeneration(*next);
        kv.mod_revision = result->revision;
        ApplyPut(kv);
        done = true;
      } else if (!result->results.empty() && !result->results[0].kvs.empty()) {
        ApplyPut(result->results[0].kvs[0]);  // Someone else's proposal won: decide again on it.
      } else {
        etcd::KeyValue gone;
        gone.key = key;
        ApplyDelete(gone);
      }
    }
    if (!done) return true;  // Contended: try again on the next pass.
    if (absl::Status s = pending_.Remove(job, proposal); !s.ok()) {
      SPDLOG_WARN("slice {}: job {}: {}: a restarted tpud would propose it again (moot by then)", options_.slice,
                  job, std::string(s.message()));
    }
    proposals_.pop_front();
  }
  return true;
}

// --- the leader ---

bool Coordinator::Elect() {
  {
    absl::MutexLock lock(&view_mu_);
    if (leader_) return true;
  }
  etcd::Txn txn;
  txn.If(Compare::CreateRevision(keys_.leader(), Compare::kEqual, 0))
      .Then(TxnOp::Put(keys_.leader(), std::to_string(options_.worker_id), lease_.id))
      .Else(TxnOp::Get(keys_.leader()));
  absl::StatusOr<etcd::TxnResult> result = etcd_.Commit(txn);
  if (!result.ok()) {
    EtcdDown(result.status());
    return false;
  }
  if (result->succeeded) {
    absl::MutexLock lock(&view_mu_);
    leader_ = options_.worker_id;
    leader_lease_ = lease_.id;
    leader_create_revision_ = result->revision;
    SPDLOG_INFO("slice {}: worker {} leads the slice", options_.slice, options_.worker_id);
  } else if (!result->results.empty() && !result->results[0].kvs.empty()) {
    ApplyPut(result->results[0].kvs[0]);
  }
  return true;
}

bool Coordinator::FencedWrite(const std::string& job, const GenerationRecord& next) {
  std::int64_t mod_revision = 0;
  {
    absl::MutexLock lock(&view_mu_);
    mod_revision = gangs_[job].record_mod_revision;
  }
  const std::string key = keys_.generation(job);
  etcd::Txn txn;
  txn.If(Compare::CreateRevision(keys_.leader(), Compare::kEqual, leader_create_revision_))
      .If(Compare::ModRevision(key, Compare::kEqual, mod_revision))
      .Then(TxnOp::Put(key, EncodeGeneration(next)));
  absl::StatusOr<etcd::TxnResult> result = etcd_.Commit(txn);
  if (!result.ok()) {
    EtcdDown(result.status());
    return false;
  }
  if (!result->succeeded) return false;  // No longer the leader, or the record moved: the watch tells.
  etcd::KeyValue kv;
  kv.key = key;
  kv.value = EncodeGeneration(next);
  kv.mod_revision = result->revision;
  ApplyPut(kv);
  SPDLOG_INFO("slice {}: job {}: generation {} {}: {}", options_.slice, job, next.commit.generation,
              GangPhaseName(next.commit.phase), next.commit.reason);
  return true;
}

// A member key gone is evidence of a lost worker only once it has stayed
// gone for a lease TTL while this leader reached etcd: after an etcd pause or
// outage, etcd revokes every lease that ran out meanwhile at once, and the
// workers' tpuds, alive all along, claim their keys again within a moment.
bool Coordinator::AbsentForGood(int worker) {
  const auto now = std::chrono::steady_clock::now();
  const auto since = absent_since_.try_emplace(worker, now).first->second;
  return now - since >= options_.lease_ttl;
}

void Coordinator::Lead() {
  std::set<int> members;
  std::vector<std::pair<std::string, GangState>> gangs;
  {
    absl::MutexLock lock(&view_mu_);
    if (!leader_ || *leader_ != options_.worker_id || leader_lease_ != lease_.id) {
      absent_since_.clear();  // A later term counts absences afresh.
      return;
    }
    // Workers that disagree on the slice's shape are never one gang: nothing
    // is decided until they agree (every worker shows why).
    if (!ConfigConflict(options_.worker_id, options_.num_workers, members_).empty()) return;
    for (const auto& [worker, member] : members_) members.insert(worker);
    for (const auto& [job, gang] : gangs_) {
      if (gang.record) gangs.emplace_back(job, gang);
    }
  }
  std::erase_if(absent_since_, [&](const auto& entry) { return members.count(entry.first) != 0; });
  const std::int64_t now = NowUnixMs();
  for (auto& [job, gang] : gangs) {
    const GenerationRecord& record = *gang.record;
    if (record.commit.phase == GangPhase::kStarting) {
      for (int worker = 0; worker < options_.num_workers; ++worker) {
        if (members.count(worker) != 0) continue;
        if (!AbsentForGood(worker)) continue;
        std::optional<GenerationRecord> next = LoseWorker(record, worker, now);
        if (next && !FencedWrite(job, *next)) return;
        break;
      }
      continue;
    }
    if (record.commit.phase != GangPhase::kStopping) continue;
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    LeaderStep step = Decide(record, members, gang.reports, options_.num_workers, options_.reset, uniform(random_), now);
    {
      absl::MutexLock lock(&view_mu_);
      std::string& waiting_for = gangs_[job].waiting_for;
      if (step.report_timed_out && waiting_for != step.waiting_for) {
        SPDLOG_WARN("slice {}: job {}: generation {}: waiting for {}", options_.slice, job,
                    record.commit.generation, step.waiting_for);
      }
      waiting_for = step.waiting_for;
    }
    if (step.kind == LeaderStep::kWait) continue;
    if (step.kind == LeaderStep::kResetSlice) {
      if (!FencedWrite(job, step.next)) return;
      SPDLOG_WARN("slice {}: job {}: resetting the slice for generation {} ({})", options_.slice, job,
                  record.commit.generation, FailureClassName(*record.commit.reset_class));
      const absl::Status reset = options_.reset_slice ? options_.reset_slice(&reset_cancel_)
                                                      : absl::UnimplementedError("no slice reset configured");
      if (reset_cancel_.cancelled()) {
        SPDLOG_WARN("slice {}: job {}: slice reset cut short: tpud is stopping ({}); the next leader restarts the "
                    "gang without it",
                    options_.slice, job, reset.ok() ? "done" : std::string(reset.message()));
        return;
      }
      if (reset.ok()) {
        SPDLOG_INFO("slice {}: job {}: slice reset done", options_.slice, job);
      } else {
        SPDLOG_ERROR("slice {}: job {}: slice reset failed: {}; restarting without it", options_.slice, job,
                     std::string(reset.message()));
      }
      continue;
    }
    // kCommit, after the gang's backoff.
    const auto steady_now = std::chrono::steady_clock::now();
    if (step.delay.count() > 0 && step.next.commit.phase == GangPhase::kStarting) {
      std::optional<std::pair<std::int64_t, std::chrono::steady_clock::time_point>> due;
      {
        absl::MutexLock lock(&view_mu_);
        due = gangs_[job].due;
        if (!due || due->first != record.commit.generation) {
          due = std::make_pair(record.commit.generation,
                               steady_now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(step.delay));
          gangs_[job].due = due;
          gangs_[job].waiting_for = absl::StrCat("backoff ", step.delay.count(), " s");
        }
      }
      if (steady_now < due->second) continue;
    }
    if (!FencedWrite(job, step.next)) return;
    if (step.next.commit.phase == GangPhase::kStarting && record.counted) {
      absl::MutexLock lock(&view_mu_);
      ++gang_restarts_;
    }
  }
}

}  // namespace tpud::slice
