// Hang detection for one attempt: when does "no progress" mean "hung"?
//
// A job shows progress by printing lines that match a regex, by advancing a
// heartbeat file's mtime, or (with neither configured) by printing anything.
// The tracker turns those events into a deadline; the Job arms a Clock timer
// for Deadline() and treats the attempt as hung when it fires.
//
// Rules (all times on the steady clock; seconds as doubles):
//   * No `progress:` section (configured == false): never hung; Deadline() is
//     nullopt and nothing counts as progress.
//   * Hang detection is on when timeout_seconds > 0 or learn_timeout is set.
//     With timeout_seconds == 0 and learn_timeout == false it is off (no
//     deadline ever), as with no section.
//   * Before the first progress: deadline = attempt_start +
//     max(startup_grace_seconds, timeout_seconds). The grace is the whole
//     allowance for the first sign of life (XLA compilation, data loading),
//     like NVRx's `setup:900` section timeout, and is never tighter than the
//     steady-state timeout. (Not grace + timeout: that would idle a TPU pod
//     for 25 minutes on a job that never started.) When both are 0 (only
//     learning is on) there is no startup deadline.
//   * After progress at time t: deadline = t + effective_timeout(). When there
//     is no effective timeout (timeout_seconds == 0 and nothing learned yet)
//     the deadline is nullopt.
//   * Learned timeout (learn_timeout, after NVRx: safety_factor x the longest
//     observed interval; NVIDIA/nvidia-resiliency-ext, fault_tolerance). Learning
//     samples "ticks": with a regex that has a capture group, lines whose
//     group 1 parses as a step different from the last one; with a regex
//     without a group, every matching line; with no regex, every heartbeat.
//     Intervals run between consecutive ticks (attempt start -> first tick is
//     startup, not sampled). Once min_steps intervals are observed:
//       learned = clamp(safety_factor x longest interval, kMinLearnedTimeout,
//                       timeout_seconds if > 0 else unbounded)
//     and the longest interval keeps updating for the rest of the attempt, so
//     the learned value only grows. A configured timeout_seconds is an upper
//     bound: learning only tightens it.
//     Caveat: learning sees only intervals the job has shown; a long pause it
//     has not shown yet (a first checkpoint save at step 1000) may look like a
//     hang. Raise min_steps or safety_factor for such jobs.
//   * A progress line with a regex group that does not parse as an integer
//     still counts as progress; it just records no step.
//   * With a heartbeat_file and an empty regex, only the heartbeat counts:
//     output lines do not (a hung trainer often keeps printing warnings).
//
// Thread-safety: not thread-safe; one owner (the Job, on the event loop).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/clock.h"
#include "daemon/core/job_spec.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace tpud {

// The smallest learned timeout: a job stepping every 100 ms is not declared
// hung after half a second of GC pause or log buffering.
inline constexpr Seconds kMinLearnedTimeout{10.0};

// The spec's own rules: ValidateProgressSpec in daemon/core/job_spec.h.

// Progress and the hang deadline of one attempt. See the file comment.
class ProgressTracker {
 public:
  // Errors: those of ValidateProgressSpec.
  static absl::StatusOr<ProgressTracker> Create(const ProgressSpec& spec, SteadyTime attempt_start);
  ProgressTracker(ProgressTracker&&) noexcept;
  ProgressTracker& operator=(ProgressTracker&&) noexcept;
  ~ProgressTracker();

  // One line of the job's output (without '\n'). Returns true when it counted
  // as progress; records the step when the regex's group 1 parses as an int64.
  bool OnOutputLine(std::string_view line, SteadyTime now);
  // Each line of `lines` (each ending in '\n'), all seen at `now`; true when
  // any counted. One regex pass over the block first: a block without a
  // progress line costs no per-line work.
  bool OnOutputLines(std::string_view lines, SteadyTime now);
  // The heartbeat file's mtime advanced (the caller watches the file). Counts
  // as progress whenever a progress section is configured.
  void OnHeartbeat(SteadyTime now);

  // When the attempt counts as hung if nothing else happens; nullopt = never.
  std::optional<SteadyTime> Deadline() const;
  // The last step parsed from a progress line, if any.
  std::optional<std::int64_t> last_step() const { return last_step_; }
  // When progress was last seen, if ever.
  std::optional<SteadyTime> last_progress() const { return last_progress_; }
  // The timeout applied after progress: the learned one once learned, else the
  // configured one; Seconds(0) when there is none.
  Seconds effective_timeout() const;
  // The learned timeout, once min_steps intervals have been observed.
  std::optional<Seconds> learned_timeout() const;
  // Tick intervals observed so far (for status and tests).
  int intervals_observed() const { return intervals_; }

 private:
  ProgressTracker(const ProgressSpec& spec, SteadyTime attempt_start, std::unique_ptr<re2::RE2> re);
  bool Enabled() const;
  void RecordProgress(SteadyTime now);
  void RecordTick(SteadyTime now);

  ProgressSpec spec_;
  SteadyTime attempt_start_;
  std::unique_ptr<re2::RE2> re_;  // Null when spec_.regex is empty.
  // re_ in multi-line mode, for OnOutputLines; null with re_, or when the
  // regex anchors to the text's ends (\A, \z).
  std::unique_ptr<re2::RE2> lines_re_;
  bool regex_has_group_ = false;
  std::optional<SteadyTime> last_progress_;
  std::optional<std::int64_t> last_step_;
  std::optional<SteadyTime> last_tick_;
  Seconds longest_interval_{0};
  int intervals_ = 0;
};

}  // namespace tpud
