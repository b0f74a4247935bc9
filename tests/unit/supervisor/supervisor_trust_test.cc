// The Supervisor never acts on a request it could not record, never gives a
// socket caller more than its own identity, and keeps what it holds bounded.
#include <catch2/catch.hpp>
#include <pwd.h>

#include "daemon/state/state_store.h"
#include "daemon/supervisor/supervisor.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_launcher.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;

// A store whose writes fail while `failing` is set, as a full or read-only disk makes them.
class FlakyStore final : public StateStore {
 public:
  bool failing = false;
  absl::Status Fail() const { return absl::ResourceExhaustedError("state store \"/x/tpud.db\": database or disk is full"); }
  absl::Status PutJob(const JobRecord& job) override { return failing ? Fail() : inner_->PutJob(job); }
  absl::Status DeleteJob(const std::string& name, bool history) override {
    return failing ? Fail() : inner_->DeleteJob(name, history);
  }
  absl::StatusOr<std::vector<JobRecord>> LoadJobs() override { return inner_->LoadJobs(); }
  absl::StatusOr<std::int64_t> OpenIncident(const IncidentRecord& i) override {
    if (failing) return Fail();
    return inner_->OpenIncident(i);
  }
  absl::Status UpdateIncident(const IncidentRecord& i) override { return failing ? Fail() : inner_->UpdateIncident(i); }
  absl::StatusOr<std::vector<IncidentRecord>> ListIncidents(const std::string& j, int l) override {
    return inner_->ListIncidents(j, l);
  }
  absl::StatusOr<std::vector<IncidentRecord>> OpenIncidents() override { return inner_->OpenIncidents(); }
  absl::StatusOr<std::int64_t> AppendEvent(const EventRecord& e) override {
    if (failing) return Fail();
    return inner_->AppendEvent(e);
  }
  absl::StatusOr<std::vector<EventRecord>> ListEvents(int limit) override { return inner_->ListEvents(limit); }
  absl::Status Sync() override { return failing ? Fail() : absl::OkStatus(); }

 private:
  std::unique_ptr<StateStore> inner_ = MakeMemoryStateStore();
};

// No checkpoints anywhere; `store` keeps the records.
Supervisor::Deps WithStore(Clock& clock, Launcher& launcher, StateStore* store) {
  Supervisor::Deps deps;
  deps.clock = &clock;
  deps.launcher = &launcher;
  deps.store = store;
  deps.find_checkpoint = [](const CheckpointSpec&) { return absl::StatusOr<std::optional<CheckpointRef>>(); };
  return deps;
}

struct Fixture {
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  FlakyStore store;
  Supervisor supervisor{WithStore(clock, launcher, &store), {"/logs", "/state"}};
  static JobSpec Spec(const std::string& name) {
    JobSpec spec;
    spec.name = name;
    spec.command = {"/bin/true"};
    return spec;
  }
};

TEST_CASE("Supervisor: a request whose intent cannot be recorded fails UNAVAILABLE and is not carried out",
          "[supervisor][trust]") {
  Fixture f;
  REQUIRE(f.supervisor.AddJob(Fixture::Spec("a")).ok());
  f.store.failing = true;
  absl::StatusOr<JobSnapshot> started = f.supervisor.Start("a", "test");
  REQUIRE_FALSE(started.ok());
  CHECK(started.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(started.status().message()), Contains("disk is full"));
  CHECK_THAT(std::string(started.status().message()), Contains("not carried out"));
  CHECK(f.launcher.launched.empty());
  CHECK(f.supervisor.Get("a")->state == JobState::kStopped);
  CHECK_FALSE(f.supervisor.store_health().ok);
  CHECK(f.supervisor.store_health().errors_total >= 1);

  absl::StatusOr<JobSnapshot> submitted = f.supervisor.SubmitAndStart(Fixture::Spec("b"), "test", "name: b\n");
  CHECK(submitted.status().code() == absl::StatusCode::kUnavailable);
  CHECK_FALSE(f.supervisor.HasJob("b"));  // Nothing half-added.

  f.store.failing = false;  // The disk has room again.
  REQUIRE(f.supervisor.Start("a", "test").ok());
  CHECK(f.launcher.launched.size() == 1);
  CHECK(f.supervisor.store_health().ok);
  CHECK_FALSE(f.supervisor.store_health().last_error.empty());  // Kept for `tpuctl info`.
}

TEST_CASE("Supervisor: a stop that cannot be recorded is refused, so a restart cannot undo it",
          "[supervisor][trust]") {
  Fixture f;
  REQUIRE(f.supervisor.AddJob(Fixture::Spec("a")).ok());
  REQUIRE(f.supervisor.Start("a", "test").ok());
  f.store.failing = true;
  CHECK(f.supervisor.Stop("a", "test").status().code() == absl::StatusCode::kUnavailable);
  CHECK(f.launcher.last().signals.empty());
  CHECK(IsActive(f.supervisor.Get("a")->state));
}

Caller Nobody() {
  const passwd* nobody = ::getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  return Caller{nobody->pw_uid, nobody->pw_gid, {nobody->pw_gid}};
}

TEST_CASE("Supervisor: a non-root caller's submitted job runs as that caller", "[supervisor][trust]") {
  Fixture f;
  const Caller caller = Nobody();
  REQUIRE(f.supervisor.SubmitAndStart(Fixture::Spec("mine"), "test", "name: mine\n", caller).ok());
  REQUIRE(f.launcher.launched.size() == 1);
  const LaunchSpec& launched = f.launcher.last().spec;
  REQUIRE(launched.run_as.has_value());
  CHECK(launched.run_as->uid == caller.uid);
  CHECK(launched.run_as->gid == caller.gid);
  CHECK(launched.run_as->user == "nobody");
}

TEST_CASE("Supervisor: a non-root caller naming another user or group is PERMISSION_DENIED", "[supervisor][trust]") {
  Fixture f;
  JobSpec as_root = Fixture::Spec("escalate");
  as_root.user = "root";
  absl::StatusOr<JobSnapshot> denied = f.supervisor.SubmitAndStart(as_root, "test", "x", Nobody());
  CHECK(denied.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(denied.status().message()), Contains("may only submit jobs that run as itself"));
  JobSpec in_root_group = Fixture::Spec("escalate");
  in_root_group.group = "root";
  CHECK(f.supervisor.SubmitAndStart(in_root_group, "test", "x", Nobody()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  CHECK(f.launcher.launched.empty());
  // Root may run a job as anyone.
  CHECK(f.supervisor.SubmitAndStart(as_root, "test", "x", Caller{0, 0, {}}).ok());
}

TEST_CASE("Supervisor: a non-root caller may not replace or remove a job that is not its own", "[supervisor][trust]") {
  Fixture f;
  REQUIRE(f.supervisor.AddJob(Fixture::Spec("configured")).ok());
  CHECK(f.supervisor.SubmitAndStart(Fixture::Spec("configured"), "test", "x", Nobody()).status().code() ==
        absl::StatusCode::kPermissionDenied);
  REQUIRE(f.supervisor.SubmitAndStart(Fixture::Spec("roots"), "test", "name: roots\n").ok());
  f.launcher.Exit(0);
  CHECK(f.supervisor.RemoveSubmittedJob("roots", Nobody()).code() == absl::StatusCode::kPermissionDenied);
  CHECK(f.supervisor.HasJob("roots"));
}

TEST_CASE("Supervisor: remove forgets an inactive submitted job, refuses an active or configured one",
          "[supervisor][trust]") {
  Fixture f;
  REQUIRE(f.supervisor.AddJob(Fixture::Spec("configured")).ok());
  REQUIRE(f.supervisor.SubmitAndStart(Fixture::Spec("adhoc"), "test", "name: adhoc\n").ok());
  CHECK(f.supervisor.RemoveSubmittedJob("adhoc").code() == absl::StatusCode::kFailedPrecondition);  // Active.
  f.launcher.Exit(0);
  REQUIRE(f.supervisor.RemoveSubmittedJob("adhoc").ok());
  CHECK_FALSE(f.supervisor.HasJob("adhoc"));
  CHECK(f.store.LoadJobs()->empty());  // Its record went with it (the configured one was never written).
  CHECK(f.supervisor.RemoveSubmittedJob("configured").code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.supervisor.RemoveSubmittedJob("nope").code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Supervisor: submitted jobs are bounded in number and spec bytes", "[supervisor][trust]") {
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  Supervisor::Options options{"/logs", "/state"};
  options.max_submitted_jobs = 3;
  options.max_submitted_spec_bytes = 100;
  Supervisor supervisor(clock, launcher, options);
  for (const char* name : {"a", "b", "c"}) {
    REQUIRE(supervisor.SubmitAndStart(Fixture::Spec(name), "test", "x").ok());
  }
  absl::StatusOr<JobSnapshot> fourth = supervisor.SubmitAndStart(Fixture::Spec("d"), "test", "x");
  CHECK(fourth.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(fourth.status().message()), Contains("tpuctl remove"));
  launcher.Exit(0);
  REQUIRE(supervisor.RemoveSubmittedJob("c").ok());
  CHECK(supervisor.SubmitAndStart(Fixture::Spec("d"), "test", "x").ok());
  CHECK(supervisor.SubmitAndStart(Fixture::Spec("a"), "test", std::string(200, 'y')).status().code() ==
        absl::StatusCode::kResourceExhausted);
}

TEST_CASE("Supervisor: state changes and incidents survive a restart as `tpuctl events` history", "[supervisor][trust]") {
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  std::unique_ptr<StateStore> store = MakeMemoryStateStore();
  {
    Supervisor first(WithStore(clock, launcher, store.get()), {"/logs", "/state"});
    REQUIRE(first.AddJob(Fixture::Spec("a")).ok());
    REQUIRE(first.Start("a", "test").ok());
    launcher.Exit(1);
  }
  Supervisor second(WithStore(clock, launcher, store.get()), {"/logs", "/state"});
  REQUIRE(second.AddJob(Fixture::Spec("a")).ok());
  REQUIRE(second.RestoreFromStore().ok());
  const std::vector<NumberedEvent> history = second.EventHistory("a", 0);
  REQUIRE(history.size() >= 3);  // stopped -> starting, starting -> backoff, and the incident.
  CHECK(std::holds_alternative<JobEvent>(history.front().event));
  CHECK(std::get<JobEvent>(history.front().event).to == JobState::kStarting);
  bool has_incident = false;
  for (const NumberedEvent& e : history) has_incident |= std::holds_alternative<Incident>(e.event);
  CHECK(has_incident);
}

}  // namespace
}  // namespace tpud
