// The slice coordinator (daemon/slice/coordinator.h) of several workers
// against a real etcd: one generation per incident, the leader commits only
// once every worker reported, a lost worker stops the gang until it is back,
// and nothing is committed while etcd is down.
#include "daemon/slice/coordinator.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <mutex>

#include "tests/etcd/etcd_test_util.h"

namespace tpud::slice {
namespace {

using namespace std::chrono_literals;
using etcd::testing::Connect;
using etcd::testing::WaitUntil;

// One worker: its etcd client, its coordinator, and what it was told.
class Worker {
 public:
  Worker(const std::vector<std::string>& endpoints, int id, int num_workers, const std::filesystem::path& state_dir,
         std::chrono::seconds lease = 3s)
      : client_(Connect(endpoints, 2000ms)) {
    CoordinatorOptions options;
    options.prefix = "/test";
    options.slice = "v4-32";
    options.worker_id = id;
    options.num_workers = num_workers;
    options.lease_ttl = lease;
    options.host = "host-" + std::to_string(id);
    options.state_dir = state_dir;
    options.tick = 50ms;
    options.reset = SliceReset::kSlice;
    options.reset_slice = [this](HttpCancel* cancel) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++resets_;
      }
      // A slow reset, when asked for: it lasts until cancelled (or a minute).
      for (int i = 0; block_reset_ && i < 6000 && !cancel->cancelled(); ++i) std::this_thread::sleep_for(10ms);
      reset_cancelled_ = cancel->cancelled();
      return cancel->cancelled() ? absl::CancelledError("cancelled") : absl::OkStatus();
    };
    CoordinatorHooks hooks;
    hooks.post = [](std::function<void()> fn) { fn(); };
    hooks.on_commit = [this](const std::string& job, const GangCommit& commit) {
      std::lock_guard<std::mutex> lock(mu_);
      commits_.push_back(commit);
    };
    hooks.on_spec = [this](const std::string& job, const std::string& yaml) {
      std::lock_guard<std::mutex> lock(mu_);
      specs_.push_back(yaml);
    };
    coordinator_ = std::make_unique<Coordinator>(*client_, options, hooks);
    coordinator_->Start();
  }

  Coordinator& coordinator() { return *coordinator_; }
  std::vector<GangCommit> commits() {
    std::lock_guard<std::mutex> lock(mu_);
    return commits_;
  }
  std::vector<std::string> specs() {
    std::lock_guard<std::mutex> lock(mu_);
    return specs_;
  }
  int resets() {
    std::lock_guard<std::mutex> lock(mu_);
    return resets_;
  }
  std::optional<GangCommit> last() {
    std::lock_guard<std::mutex> lock(mu_);
    if (commits_.empty()) return std::nullopt;
    return commits_.back();
  }
  bool WaitFor(std::int64_t generation, GangPhase phase, std::chrono::milliseconds timeout = 10000ms) {
    return WaitUntil(
        [&] {
          std::optional<GangCommit> commit = last();
          return commit && commit->generation == generation && commit->phase == phase;
        },
        timeout);
  }
  void ReportSteps(std::int64_t generation, std::vector<std::int64_t> steps, int id) {
    coordinator_->Report("train", GangReport{id, generation, std::move(steps)});
  }
  void Stop() { coordinator_->Stop(); }
  void BlockResets() { block_reset_ = true; }
  bool reset_cancelled() const { return reset_cancelled_; }

 private:
  std::unique_ptr<etcd::GrpcEtcdClient> client_;
  std::unique_ptr<Coordinator> coordinator_;
  std::mutex mu_;
  std::vector<GangCommit> commits_;
  std::vector<std::string> specs_;
  int resets_ = 0;
  std::atomic<bool> block_reset_{false};
  std::atomic<bool> reset_cancelled_{false};
};

GangProposal Start() {
  GangProposal proposal;
  proposal.intent = GangProposal::Intent::kStart;
  proposal.reason = "start requested";
  proposal.restart.backoff_initial_seconds = 0;
  return proposal;
}

GangProposal Crash(std::int64_t base, int worker, RecoveryAction action = RecoveryAction::kRestart) {
  GangProposal proposal;
  proposal.intent = GangProposal::Intent::kRestart;
  proposal.base_generation = base;
  proposal.worker = worker;
  proposal.reason = "worker " + std::to_string(worker) + ": crash";
  Classification failure;
  failure.failure_class = action == RecoveryAction::kResetAndRestart ? FailureClass::kDeadlineExceeded
                                                                     : FailureClass::kCrash;
  failure.action = action;
  failure.rule = "exit:code 1";
  proposal.failure = failure;
  proposal.counted = true;
  proposal.restart.backoff_initial_seconds = 0;
  proposal.restart.backoff_jitter = 0;
  return proposal;
}

struct Dirs {
  std::filesystem::path root;
  Dirs() {
    char pattern[] = "/tmp/tpud-slice-XXXXXX";
    root = mkdtemp(pattern);
  }
  ~Dirs() { std::filesystem::remove_all(root); }
  std::filesystem::path For(int worker) const {
    std::filesystem::path dir = root / std::to_string(worker);
    std::filesystem::create_directories(dir);
    return dir;
  }
};

// Starts the gang on three workers: stopping(1), every report, starting(1).
void StartGang(std::vector<std::unique_ptr<Worker>>& workers, std::vector<std::vector<std::int64_t>> steps) {
  workers[0]->coordinator().Propose("train", Start());
  for (auto& w : workers) REQUIRE(w->WaitFor(1, GangPhase::kStopping));
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) workers[i]->ReportSteps(1, steps[i], i);
  for (auto& w : workers) REQUIRE(w->WaitFor(1, GangPhase::kStarting));
}

}  // namespace

TEST_CASE("slice: three workers start together and restart together from the newest common step", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 3, dirs.For(i)));
  REQUIRE(WaitUntil([&] { return workers[0]->coordinator().View().members.size() == 3; }, 10000ms));

  StartGang(workers, {{}, {}, {}});
  CHECK_FALSE(workers[1]->last()->step);  // Nothing held anywhere: from scratch.

  // Two workers fail in the same incident: one generation.
  workers[1]->coordinator().Propose("train", Crash(1, 1));
  workers[2]->coordinator().Propose("train", Crash(1, 2));
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStopping));
  workers[0]->ReportSteps(2, {10, 20, 30}, 0);
  workers[1]->ReportSteps(2, {10, 20}, 1);
  // Not every worker reported: still stopping.
  std::this_thread::sleep_for(300ms);
  CHECK(workers[0]->last()->phase == GangPhase::kStopping);
  bool leader_waits_for_2 = false;
  for (auto& w : workers) {
    for (const SliceView::Gang& gang : w->coordinator().View().gangs) {
      if (gang.waiting_for == "workers 2 to report") leader_waits_for_2 = true;
    }
  }
  CHECK(leader_waits_for_2);
  workers[2]->ReportSteps(2, {20, 30}, 2);
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStarting));
  for (auto& w : workers) {
    CHECK(w->last()->step == 20);
    CHECK(w->last()->restarts == 1);
  }
  // Each worker saw every commit once, in order, and no third generation.
  for (auto& w : workers) {
    std::vector<std::int64_t> generations;
    for (const GangCommit& c : w->commits()) generations.push_back(c.generation);
    CHECK(generations == std::vector<std::int64_t>{1, 1, 2, 2});
  }
  // Exactly one leader, whom every worker names.
  const std::optional<int> leader = workers[0]->coordinator().View().leader;
  REQUIRE(leader);
  for (auto& w : workers) CHECK(w->coordinator().View().leader == leader);
}

TEST_CASE("slice: a reset-class failure resets the slice exactly once, by the leader", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 3, dirs.For(i)));
  REQUIRE(WaitUntil([&] { return workers[2]->coordinator().View().members.size() == 3; }, 10000ms));
  StartGang(workers, {{5}, {5}, {5}});
  for (int i = 0; i < 3; ++i) workers[i]->coordinator().Propose("train", Crash(1, i, RecoveryAction::kResetAndRestart));
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStopping));
  for (int i = 0; i < 3; ++i) workers[i]->ReportSteps(2, {5}, i);
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStarting));
  CHECK(workers[0]->resets() + workers[1]->resets() + workers[2]->resets() == 1);
}

TEST_CASE("slice: a leader stopped during a slice reset cancels it rather than wait it out", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  workers.push_back(std::make_unique<Worker>(cluster.endpoints(), 0, 1, dirs.For(0)));
  REQUIRE(WaitUntil([&] { return workers[0]->coordinator().View().leader == 0; }, 10000ms));
  StartGang(workers, {{5}});
  workers[0]->BlockResets();
  workers[0]->coordinator().Propose("train", Crash(1, 0, RecoveryAction::kResetAndRestart));
  REQUIRE(workers[0]->WaitFor(2, GangPhase::kStopping));
  workers[0]->ReportSteps(2, {5}, 0);
  REQUIRE(WaitUntil([&] { return workers[0]->resets() == 1; }, 10000ms));  // The reset runs.
  const auto start = std::chrono::steady_clock::now();
  workers[0]->Stop();
  CHECK(std::chrono::steady_clock::now() - start < 30s);  // Not the minute the reset would take.
  CHECK(workers[0]->reset_cancelled());
}

TEST_CASE("slice: a lost worker stops the gang, which waits for it and then restarts", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 3, dirs.For(i)));
  REQUIRE(WaitUntil([&] { return workers[1]->coordinator().View().members.size() == 3; }, 10000ms));
  StartGang(workers, {{7}, {7}, {7}});
  const std::optional<int> leader = workers[0]->coordinator().View().leader;
  REQUIRE(leader);
  const int lost = (*leader + 1) % 3;

  // Its tpud dies, and is not back within the lease: the gang stops, not counted.
  workers[lost]->Stop();
  std::filesystem::remove(dirs.For(lost) / "slice-lease");
  REQUIRE(workers[*leader]->WaitFor(2, GangPhase::kStopping, 15000ms));
  CHECK(workers[*leader]->last()->reason == "worker " + std::to_string(lost) + " lost (its tpud's lease expired)");
  for (int i = 0; i < 3; ++i) {
    if (i != lost) workers[i]->ReportSteps(2, {7}, i);
  }
  std::this_thread::sleep_for(500ms);
  CHECK(workers[*leader]->last()->phase == GangPhase::kStopping);  // Waits for the lost worker.

  // It comes back, learns the generation, reports: everyone starts.
  workers[lost] = std::make_unique<Worker>(cluster.endpoints(), lost, 3, dirs.For(lost));
  REQUIRE(workers[lost]->WaitFor(2, GangPhase::kStopping));
  workers[lost]->ReportSteps(2, {7}, lost);
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStarting));
  CHECK(workers[lost]->last()->restarts == 0);
  CHECK(workers[lost]->last()->step == 7);
}

TEST_CASE("slice: a worker leaving as its tpud stops is written before it stops, and the gang waits for it",
          "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 2, dirs.For(i)));
  REQUIRE(WaitUntil([&] { return workers[0]->coordinator().View().members.size() == 2; }, 10000ms));
  StartGang(workers, {{7}, {7}});
  GangProposal leave;
  leave.intent = GangProposal::Intent::kLeave;
  leave.base_generation = 1;
  leave.worker = 1;
  leave.reason = "worker 1 left: tpud received SIGTERM";
  workers[1]->coordinator().Propose("train", leave);
  workers[1]->Stop();  // At once: the proposal still reaches etcd.
  REQUIRE(workers[0]->WaitFor(2, GangPhase::kStopping));
  CHECK(workers[0]->last()->reason == "worker 1 left: tpud received SIGTERM");
  workers[0]->ReportSteps(2, {7}, 0);
  std::this_thread::sleep_for(500ms);
  CHECK(workers[0]->last()->phase == GangPhase::kStopping);  // Waits for the worker that left.
  workers[1] = std::make_unique<Worker>(cluster.endpoints(), 1, 2, dirs.For(1));
  REQUIRE(workers[1]->WaitFor(2, GangPhase::kStopping));
  workers[1]->ReportSteps(2, {7}, 1);
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStarting));
  CHECK(workers[0]->last()->restarts == 0);
}

TEST_CASE("slice: a tpud restart within the lease rejoins with its lease, and nobody is lost", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 2, dirs.For(i), 4s));
  REQUIRE(WaitUntil([&] { return workers[0]->coordinator().View().members.size() == 2; }, 10000ms));
  workers[0]->coordinator().Propose("train", Start());
  for (auto& w : workers) REQUIRE(w->WaitFor(1, GangPhase::kStopping));
  for (int i = 0; i < 2; ++i) workers[i]->ReportSteps(1, {}, i);
  for (auto& w : workers) REQUIRE(w->WaitFor(1, GangPhase::kStarting));

  for (int i = 0; i < 2; ++i) {  // Each worker's tpud restarts in turn, leader included.
    workers[i]->Stop();
    workers[i] = std::make_unique<Worker>(cluster.endpoints(), i, 2, dirs.For(i), 4s);
    REQUIRE(workers[i]->WaitFor(1, GangPhase::kStarting));
  }
  std::this_thread::sleep_for(6s);  // Longer than the lease.
  for (auto& w : workers) {
    CHECK(w->last()->generation == 1);
    CHECK(w->coordinator().View().members.size() == 2);
  }
}

TEST_CASE("slice: with etcd down nothing is committed, and a failure in the outage resolves once it is back", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 2, dirs.For(i), 5s));
  REQUIRE(WaitUntil([&] { return workers[0]->coordinator().View().members.size() == 2; }, 10000ms));
  workers[0]->coordinator().Propose("train", Start());
  for (auto& w : workers) REQUIRE(w->WaitFor(1, GangPhase::kStopping));
  for (int i = 0; i < 2; ++i) workers[i]->ReportSteps(1, {3}, i);
  for (auto& w : workers) REQUIRE(w->WaitFor(1, GangPhase::kStarting));

  cluster.Kill(0);
  REQUIRE(WaitUntil([&] { return !workers[1]->coordinator().View().etcd_up; }, 15000ms));
  workers[1]->coordinator().Propose("train", Crash(1, 1));
  std::this_thread::sleep_for(3s);
  for (auto& w : workers) CHECK(w->last()->generation == 1);  // Nothing invented while etcd is away.

  cluster.Restart(0);
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStopping, 20000ms));
  for (int i = 0; i < 2; ++i) workers[i]->ReportSteps(2, {3}, i);
  for (auto& w : workers) REQUIRE(w->WaitFor(2, GangPhase::kStarting));
}

TEST_CASE("slice: a published gang spec reaches every worker", "[slice]") {
  tpud::testing::EtcdCluster cluster(1);
  Dirs dirs;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<Worker>(cluster.endpoints(), i, 2, dirs.For(i)));
  workers[1]->coordinator().Publish("train", "name: train\ngang: true\ncommand: [/bin/true]\n");
  for (auto& w : workers) {
    REQUIRE(WaitUntil([&] { return w->specs().size() == 1; }, 10000ms));
    CHECK(w->specs()[0] == "name: train\ngang: true\ncommand: [/bin/true]\n");
  }
}

}  // namespace tpud::slice
