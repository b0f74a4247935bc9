// A Job on a fake launcher, simulated time and a listener that records
// everything, for the state machine's unit tests.
#pragma once

#include <csignal>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/lines.h"
#include "daemon/supervisor/job.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_launcher.h"

namespace tpud::testing {

class RecordingListener final : public JobListener {
 public:
  void OnJobEvent(const JobEvent& event) override { events.push_back(event); }
  void OnJobOutputLines(const std::string&, std::string_view block) override {
    ForEachLine(block, [&](std::string_view line) { lines.emplace_back(line); });
  }
  void OnIncident(const Incident& incident) override { incidents.push_back(incident); }
  std::vector<Incident> incidents;
  std::vector<JobState> States() const {
    std::vector<JobState> out;
    for (const JobEvent& e : events) out.push_back(e.to);
    return out;
  }
  std::vector<JobEvent> events;
  std::vector<std::string> lines;
};

struct Harness {
  bool maintenance = false;  // What deps.maintenance_active reports.
  FakeClock clock;
  FakeLauncher launcher;
  RecordingListener listener;
  std::optional<CheckpointRef> checkpoint;
  absl::Status checkpoint_error;  // Returned by the finder when not OK.
  std::unique_ptr<Job> job;

  // TPU resets the job asked for, each with the callback that finishes it.
  std::vector<std::pair<TpuResetRequest, std::function<void(TpuResetResult)>>> resets;
  // The preflight verdicts to give, one per launch, in order; OK once used
  // up. Only with `with_tpu_reset` (JobDeps::preflight is then set).
  std::deque<PreflightVerdict> preflight_verdicts;
  int preflight_calls = 0;
  // Who attempts run as (JobDeps::resolve_run_as); null: nobody is resolved.
  std::function<absl::StatusOr<std::optional<RunAs>>(const std::string&, const std::string&)> run_as;

  // Incident bundles the job asked for, each with the callback that reports
  // it written. Only with `with_bundles` (JobDeps::capture_incident is then
  // set, with capture_seconds 10).
  std::vector<std::pair<incident::CaptureRequest, std::function<void()>>> captures;

  explicit Harness(JobSpec spec = DefaultSpec(), bool with_tpu_reset = false, bool with_bundles = false) {
    JobDeps deps;
    deps.clock = &clock;
    deps.launcher = &launcher;
    deps.listener = &listener;
    deps.find_checkpoint = [this](const CheckpointSpec&) -> absl::StatusOr<std::optional<CheckpointRef>> {
      if (!checkpoint_error.ok()) return checkpoint_error;
      return checkpoint;
    };
    deps.random = [] { return 0.0; };  // No jitter: delays are exact.
    deps.log_dir = "/logs";
    deps.default_working_dir = "/state";
    deps.maintenance_active = [this] { return maintenance; };
    deps.resolve_run_as = [this](const std::string& user, const std::string& group)
        -> absl::StatusOr<std::optional<RunAs>> {
      if (!run_as) return std::optional<RunAs>();
      return run_as(user, group);
    };
    if (with_tpu_reset) {
      deps.reset_tpu = [this](const TpuResetRequest& request, std::function<void(TpuResetResult)> done) {
        resets.emplace_back(request, std::move(done));
      };
      deps.preflight = [this](const JobSpec&) {
        ++preflight_calls;
        if (preflight_verdicts.empty()) return PreflightVerdict{};
        PreflightVerdict verdict = preflight_verdicts.front();
        preflight_verdicts.pop_front();
        return verdict;
      };
    }
    if (with_bundles) {
      deps.capture_incident = [this](incident::CaptureRequest request, std::function<void()> done) {
        captures.emplace_back(std::move(request), std::move(done));
      };
      deps.capture_seconds = Seconds(10);
    }
    job = std::make_unique<Job>(std::move(spec), std::move(deps));
  }

  static JobSpec DefaultSpec() {
    JobSpec spec;
    spec.name = "digits";
    spec.command = {"/usr/bin/python3", "train.py"};
    spec.restart.max_restarts = 3;
    spec.restart.backoff_initial_seconds = 1;
    spec.restart.backoff_max_seconds = 5;
    spec.restart.reset_after_seconds = 100;
    spec.stop.grace_seconds = 10;
    spec.stop.signals = {SIGTERM, SIGKILL};
    spec.resume_args = {"--resume-from", "{checkpoint}", "--step={step}"};
    return spec;
  }
};

}  // namespace tpud::testing
