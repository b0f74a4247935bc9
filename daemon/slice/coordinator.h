// One worker's part in its slice's gang coordination, through etcd: keeps
// this tpud's membership (a lease and a member key), proposes generations,
// publishes reports and gang specs, follows every gang's committed
// generation, and, when this worker is the slice's leader, decides each
// stopping generation (gang_rules.h) and commits it with writes fenced on
// the leader key. Keys and values: records.h.
//
// Safety: the coordinator never invents a commit. Workers act only on
// generations read from etcd, so while etcd is unreachable, or this worker's
// lease lapsed, nothing is stopped or started; proposals and reports wait
// and are retried, and a lapsed lease is replaced by a new one.
// A tpud restart rejoins with the lease it had (its id is kept in
// state_dir/slice-lease), so no peer sees this worker lost.
//
// Threads: one coordinator thread does all etcd work; the lease keepalive
// and the watch have their own (etcd_client.h). Hooks run on the daemon's
// loop through `post`. Propose, Report, Join and Publish may be called from
// any thread and never block; View is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/gang.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/slice/gang_rules.h"
#include "daemon/slice/pending_proposals.h"
#include "daemon/slice/records.h"
#include "daemon/gce/http_client.h"

namespace tpud::slice {

struct CoordinatorOptions {
  std::string prefix = "/tpud";  // slice.etcd.prefix
  std::string slice;             // The slice's name.
  int worker_id = 0;
  int num_workers = 1;
  std::chrono::seconds lease_ttl{15};
  std::string host;                  // This worker's host name, for `tpuctl slice`.
  std::filesystem::path state_dir;   // Where the lease id is kept across tpud restarts; empty: not kept.
  SliceReset reset = SliceReset::kNone;
  // SliceReset::kSlice: resets the whole slice (queuedResources.reset);
  // blocks the coordinator thread until the reset is done, or until the
  // token is cancelled (Stop cancels it: a tpud shutting down does not wait
  // out a reset of up to tpu.reset.timeout_seconds).
  std::function<absl::Status(HttpCancel*)> reset_slice;
  std::chrono::milliseconds tick{250};  // How often pending work is retried.
};

struct CoordinatorHooks {
  std::function<void(std::function<void()>)> post;  // Runs a function on the daemon's loop.
  // On the loop: a gang's committed generation, each distinct one once (and
  // again after Join).
  std::function<void(const std::string& job, const GangCommit& commit)> on_commit;
  // On the loop: a gang spec published through etcd (YAML), new or changed.
  std::function<void(const std::string& job, const std::string& spec_yaml)> on_spec;
  // On the loop: this tpud cannot join the slice (`conflict`: why, e.g.
  // another live tpud holds its worker id), or joined (empty); each change once.
  std::function<void(const std::string& conflict)> on_membership;
};

// What `tpuctl slice` and the metrics show.
struct SliceView {
  std::string slice;
  int worker_id = 0;
  int num_workers = 0;
  bool etcd_up = false;
  std::string etcd_error;          // The last etcd error while down.
  // While down: since when (Unix ms; since tpud started when it never
  // reached etcd). What the view shows of the gangs is as last seen then.
  std::int64_t etcd_down_since_unix_ms = 0;
  // Set while the members disagree on the slice's shape (ConfigConflict).
  std::string config_conflict;
  // Set while this tpud cannot join: another live tpud holds its worker id
  // (which one, and the fix). Nothing of the slice is done meanwhile.
  std::string member_conflict;
  std::optional<int> leader;
  std::map<int, MemberRecord> members;
  struct Gang {
    std::string job;
    std::optional<GenerationRecord> record;
    std::map<int, GangReport> reports;
    std::map<int, WorkerJobStatus> statuses;
    std::string waiting_for;       // The leader's: who a stopping generation waits for.
    std::map<int, WorkerEvents> events;  // Each worker's newest events, this worker's as published.
  };
  std::vector<Gang> gangs;
  std::int64_t gang_restarts = 0;  // Generations this worker's leader committed to kStarting after a failure.
};

class Coordinator final : public GangLink {
 public:
  Coordinator(etcd::EtcdClient& etcd, CoordinatorOptions options, CoordinatorHooks hooks);
  ~Coordinator() override;  // Stop().

  // Starts the coordinator thread. Joining etcd happens there (and is retried).
  void Start();
  // Stops the thread. Proposals already made are written first, once, while
  // etcd answers (a gang worker leaving on shutdown must reach the others);
  // that takes at most etcd's request timeout per write. The lease is not
  // revoked: it lapses after its TTL unless the next tpud takes it over.
  void Stop();

  void Propose(const std::string& job, const GangProposal& proposal) override;
  void Report(const std::string& job, const GangReport& report) override;
  void Join(const std::string& job) override;
  // Stores a gang spec for every worker to run (kept and retried).
  void Publish(const std::string& job, const std::string& spec_yaml) override;
  void AttemptChanged(const std::string& job, int attempt, int pid, std::int64_t generation) override;
  std::string AttemptHeldElsewhere(const std::string& job) const override;
  // Shows this worker's state of a gang job to the other workers (written
  // when it changed; the newest wins while etcd is away).
  void PublishStatus(const std::string& job, const WorkerJobStatus& status);
  // Shows this worker's newest events of a gang job to the other workers
  // (same rules as PublishStatus).
  void PublishEvents(const std::string& job, const WorkerEvents& events);

  SliceView View() const;

 private:
  struct GangState {
    std::optional<std::string> spec;
    std::optional<GenerationRecord> record;
    std::int64_t record_mod_revision = 0;  // 0: no record.
    std::map<int, GangReport> reports;
    std::map<int, WorkerJobStatus> statuses;
    std::map<int, WorkerEvents> events;
    std::map<int, AttemptRecord> attempts;  // Each worker's running attempt, as recorded.
    std::string waiting_for;
    std::optional<GangCommit> delivered;  // The last commit posted.
    std::optional<std::string> delivered_spec;
    // The leader's pending commit after a backoff: (generation, due time).
    std::optional<std::pair<std::int64_t, std::chrono::steady_clock::time_point>> due;
  };
  struct Input {
    enum Kind { kProposal, kReport, kJoin, kPublish, kStatus, kEvents, kWatch, kLeaseLost, kAttempt };
    explicit Input(Kind k) : kind(k) {}
    Kind kind;
    std::string job;
    GangProposal proposal;
    GangReport report;
    std::string spec_yaml;
    WorkerJobStatus status;
    WorkerEvents events;
    etcd::WatchUpdate update;
    std::optional<AttemptRecord> attempt;  // kAttempt: nullopt when it ended.
    // kWatch: the Load whose watch sent it; kLeaseLost: the lease. An input
    // from an earlier watch or lease, still queued when a new session began,
    // is dropped: a stale delete would undo what the new Load read.
    std::int64_t source = 0;
  };

  void Enqueue(Input input);
  bool HasInputs() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(inputs_mu_);  // Stopping, or an input waits.
  bool EtcdReachable() const;
  void Run();
  // Each returns false when etcd failed (recorded in the view).
  bool EnsureSession();
  bool ClaimMember();
  void PostMembership(const std::string& conflict);  // hooks_.on_membership, on the loop.
  bool Load();
  void Drain(std::deque<Input>& inputs);
  void ApplyPut(const etcd::KeyValue& kv);
  void ApplyDelete(const etcd::KeyValue& kv);
  void Deliver();
  bool FlushProposals();
  bool FlushAttempts();
  bool FlushReports();
  bool FlushSpecs();
  bool FlushStatuses();
  // Writes each job's pending value (Keys member `key`) and remembers it as
  // written; false when etcd failed (the rest stays pending).
  template <typename T>
  bool FlushLatest(std::map<std::string, T>& pending, std::map<std::string, T>& written,
                   std::string (Keys::*key)(const std::string&, int) const, std::string (*encode)(const T&));
  bool Elect();
  void Lead();
  bool FencedWrite(const std::string& job, const GenerationRecord& next);
  void EtcdDown(const absl::Status& status);
  void EtcdUp();
  void ResumePendingProposals();
  bool AbsentForGood(int worker);
  bool IsThisTpud(const std::string& host, const std::string& state_dir) const;
  void NoteRevision(std::int64_t revision);
  void PersistLease() const;
  std::optional<std::int64_t> LoadLease() const;
  std::int64_t NowUnixMs() const;

  etcd::EtcdClient& etcd_;
  const CoordinatorOptions options_;
  const CoordinatorHooks hooks_;
  const Keys keys_;
  PendingProposals pending_;  // Stops and leaves not yet in etcd, on disk.
  // This worker's attempt records to write (nullopt: delete), per job.
  std::map<std::string, std::optional<AttemptRecord>> attempt_writes_;
  // The leader's: since when each worker's member key has been missing
  // while etcd answered (coordinator thread only).
  std::map<int, std::chrono::steady_clock::time_point> absent_since_;
  std::int64_t watch_epoch_ = 0;   // Counts Loads; a watch's updates carry its Load's (coordinator thread only).
  std::int64_t max_revision_ = 0;  // The highest etcd revision seen (coordinator thread only).

  // Inputs from other threads.
  absl::Mutex inputs_mu_;
  std::deque<Input> inputs_ ABSL_GUARDED_BY(inputs_mu_);
  bool stopping_ ABSL_GUARDED_BY(inputs_mu_) = false;
  std::thread thread_;

  // Coordinator thread only.
  HttpCancel reset_cancel_;  // Cancelled by Stop, from any thread.
  std::unique_ptr<etcd::LeaseKeepAlive> keepalive_;
  std::unique_ptr<etcd::Watcher> watcher_;
  etcd::Lease lease_;
  bool member_written_ = false;
  static constexpr auto kClaimRetry = std::chrono::seconds(1);  // While another tpud holds this worker id.
  std::chrono::steady_clock::time_point claim_retry_at_{};
  std::deque<std::pair<std::string, GangProposal>> proposals_;
  std::map<std::string, GangReport> reports_;
  std::map<std::string, std::string> specs_;
  std::map<std::string, WorkerJobStatus> statuses_;          // To write.
  std::map<std::string, WorkerJobStatus> statuses_written_;  // Last written.
  std::map<std::string, WorkerEvents> events_;               // To write.
  std::map<std::string, WorkerEvents> events_written_;       // Last written.
  std::int64_t leader_create_revision_ = 0;
  std::mt19937_64 random_{std::random_device{}()};

  // Shared with View().
  mutable absl::Mutex view_mu_;
  bool etcd_up_ ABSL_GUARDED_BY(view_mu_) = false;
  std::string etcd_error_ ABSL_GUARDED_BY(view_mu_);
  std::int64_t etcd_down_since_unix_ms_ ABSL_GUARDED_BY(view_mu_) = 0;
  std::string member_conflict_ ABSL_GUARDED_BY(view_mu_);
  std::optional<int> leader_ ABSL_GUARDED_BY(view_mu_);
  std::int64_t leader_lease_ ABSL_GUARDED_BY(view_mu_) = 0;
  std::map<int, MemberRecord> members_ ABSL_GUARDED_BY(view_mu_);
  std::map<std::string, GangState> gangs_ ABSL_GUARDED_BY(view_mu_);
  std::int64_t gang_restarts_ ABSL_GUARDED_BY(view_mu_) = 0;
};

}  // namespace tpud::slice
