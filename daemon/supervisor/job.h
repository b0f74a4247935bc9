// One supervised job: its spec, its state machine, and its current attempt.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/common/clock.h"
#include "daemon/config/config.h"
#include "daemon/launch/launcher.h"
#include "daemon/supervisor/job_state.h"

namespace tpud {

// One state change. Every transition emits exactly one, from one place
// (Job::TransitionTo), feeding logs, metrics and the event stream alike.
struct JobEvent {
  std::int64_t sequence = 0;      // Set by the receiver that numbers events.
  WallTime time;
  std::string job;
  JobState from = JobState::kStopped;
  JobState to = JobState::kStopped;
  std::string reason;
  int attempt = 0;
  std::optional<ExitStatus> exit;            // When an attempt's end caused it.
  std::optional<CheckpointRef> checkpoint;   // On entering STARTING: what it resumes from.
};

// What a job looks like right now (what `tpuctl status` shows).
struct JobSnapshot {
  std::string name;
  JobState state = JobState::kStopped;
  std::string reason;
  WallTime state_since;
  int pid = 0;
  int attempt = 0;
  int restarts = 0;
  std::optional<ExitStatus> last_exit;
  std::optional<CheckpointRef> checkpoint;
  Seconds uptime{0};
  Seconds backoff_remaining{0};
  std::int64_t attempts_total = 0;
  std::map<std::string, std::int64_t> restarts_by_reason;  // "exit_code", "signal", ...
  std::filesystem::path log_path;
  JobSpec spec;
};

// Receives what jobs report. Called on the event loop thread.
class JobListener {
 public:
  virtual ~JobListener() = default;
  virtual void OnJobEvent(const JobEvent& event) = 0;
  virtual void OnJobOutput(const std::string& job, std::string_view line) = 0;
};

// What a Job needs from the outside; all must outlive the Job.
struct JobDeps {
  Clock* clock = nullptr;
  Launcher* launcher = nullptr;
  JobListener* listener = nullptr;
  // Finds the checkpoint to resume from; FindNewestCheckpoint in production.
  std::function<absl::StatusOr<std::optional<CheckpointRef>>(const CheckpointSpec&)> find_checkpoint;
  // Uniform in [0, 1), for backoff jitter.
  std::function<double()> random;
  std::filesystem::path log_dir;              // The job logs to log_dir/NAME.log.
  std::filesystem::path default_working_dir;  // When the spec has none.
};

// Thread-safety: not thread-safe; every call, and every callback it receives
// (timers, attempt output and exit), happens on the supervisor's loop thread.
class Job final : public AttemptObserver {
 public:
  Job(JobSpec spec, JobDeps deps);
  ~Job() override;

  // STOPPED/SUCCEEDED/FAILED -> STARTING and launches an attempt with a fresh
  // restart budget. FailedPrecondition when the job is already active.
  absl::Status Start(const std::string& reason);
  // Walks the stop ladder (STOPPING) or, in BACKOFF, goes straight to
  // STOPPED. FailedPrecondition when the job is not active.
  absl::Status Stop(const std::string& reason);
  // Stops if active, then starts again with a fresh restart budget.
  absl::Status Restart(const std::string& reason);
  // Replaces the spec; it applies from the next attempt on.
  void UpdateSpec(JobSpec spec);

  JobSnapshot Snapshot() const;
  JobState state() const { return state_; }
  const JobSpec& spec() const { return spec_; }

  // AttemptObserver.
  void OnOutputLine(std::string_view line) override;
  void OnExit(const ExitStatus& status) override;

 private:
  void TransitionTo(JobState next, std::string reason, std::optional<ExitStatus> exit = {});
  void LaunchAttempt(const std::string& reason);
  void OnAttemptFailed(const ExitStatus& status);
  void ScheduleRestart(const ExitStatus& status, const std::string& cause);
  void SendStopRung(std::size_t rung);
  void CancelTimer();
  LaunchSpec BuildLaunchSpec() const;

  JobSpec spec_;
  JobDeps deps_;
  JobState state_ = JobState::kStopped;
  std::string reason_;
  WallTime state_since_;
  std::unique_ptr<Attempt> attempt_;
  int attempt_number_ = 0;
  int restarts_ = 0;
  bool start_after_stop_ = false;
  SteadyTime attempt_started_;
  SteadyTime backoff_until_;
  Clock::TimerId timer_ = 0;
  std::optional<ExitStatus> last_exit_;
  std::optional<CheckpointRef> checkpoint_;
  std::int64_t attempts_total_ = 0;
  std::map<std::string, std::int64_t> restarts_by_reason_;
};

// Replaces {checkpoint} and {step} in each of `args`.
std::vector<std::string> ExpandResumeArgs(const std::vector<std::string>& args,
                                          const CheckpointRef& checkpoint);

}  // namespace tpud
