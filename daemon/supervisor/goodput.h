// Goodput accounting for one job: where its wall time went.
//
// Wall time is the time the job was wanted running (from a start until it is
// stopped, gives up or succeeds; time while stopped does not count). Each
// second of it is either productive (training progress the job kept) or
// badput, by cause:
//
//   startup             attempt start -> first progress (imports, XLA
//                       compilation, data loading); with a restore marker,
//                       attempt start -> the marker line
//   checkpoint_restore  the restore marker line (progress.restore_regex) ->
//                       first progress
//   wasted_progress     progress the next attempt redid: from the moment the
//                       failed attempt passed the step the next one resumed
//                       from, to its end (its whole progress when the next
//                       one started from scratch)
//   recovery            attempt end -> next attempt start: backoff, TPU
//                       reset, waiting out a maintenance event
//   hang_detection      last progress -> end of an attempt stopped as hung
//
// Whether an attempt's progress was kept is only known when the next attempt
// starts (it may resume from an older checkpoint than the trainer's last
// step): until then it counts as productive. So productive seconds can later
// move to wasted_progress; the figures are "tpud's best knowledge now", not
// counters. Steps come from progress.regex's group 1; without steps, all
// progress up to the last progress line counts as kept. A job without a
// `progress` section counts output and being RUNNING as progress. The ledger
// starts with tpud: an attempt re-attached after a tpud restart counts as
// progressing from the re-attach.
//
// Inspired by the goodput/badput split of Google's ML Goodput Measurement
// library (its badput buckets: TPU initialization, training preparation,
// program startup, wasted progress from disruption) and NVRx's restart
// accounting (NVIDIA/nvidia-resiliency-ext); here measured from outside the
// trainer, from the events tpud sees.
//
// Precision and memory: an attempt keeps its newest kRecentSamples (step,
// time) samples exactly, and at most kHistorySamples older ones, evenly
// spaced over the attempt (the spacing doubles whenever they fill up): 8 KiB
// per job. The next attempt nearly always resumes from a recent checkpoint,
// whose boundary is then exact; an older one is found to within
// 1/kHistorySamples of the attempt's progress lines.
//
// Thread-safety: not thread-safe; owned by the Job, on the event loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/core/clock.h"

namespace tpud {

enum class BadputCause { kStartup, kCheckpointRestore, kWastedProgress, kRecovery, kHangDetection };
inline constexpr std::array<BadputCause, 5> kAllBadputCauses = {
    BadputCause::kStartup, BadputCause::kCheckpointRestore, BadputCause::kWastedProgress,
    BadputCause::kRecovery, BadputCause::kHangDetection};
// "startup", "checkpoint_restore", "wasted_progress", "recovery", "hang_detection".
std::string_view BadputCauseName(BadputCause cause);

struct GoodputFigures {
  Seconds productive{0};
  std::array<Seconds, kAllBadputCauses.size()> badput{};  // Indexed by BadputCause.

  Seconds badput_of(BadputCause cause) const { return badput[static_cast<std::size_t>(cause)]; }
  Seconds wall() const;
  // productive / wall; nullopt before any wall time.
  std::optional<double> ratio() const;
};

// How an attempt ended, for the ledger.
enum class AttemptEnd { kSucceeded, kHung, kOther };

class GoodputLedger {
 public:
  static constexpr std::size_t kRecentSamples = 256;
  static constexpr std::size_t kHistorySamples = 256;

  // An attempt was launched; `resume_step` is the checkpoint step it resumes
  // from (nullopt: from scratch). Settles the previous attempt's progress.
  void OnAttemptStart(SteadyTime now, std::optional<std::int64_t> resume_step);
  // The trainer printed its restore marker (first one per attempt counts).
  void OnRestoreBegin(SteadyTime now);
  // Progress, with the step when known.
  void OnProgress(SteadyTime now, std::optional<std::int64_t> step);
  // The attempt's process ended.
  void OnAttemptEnd(SteadyTime now, AttemptEnd how);
  // The job is no longer wanted running (stopped, failed, succeeded): the
  // wall clock pauses until the next OnAttemptStart.
  void OnIdle(SteadyTime now);

  // The figures as of `now`, including the running attempt.
  GoodputFigures Figures(SteadyTime now) const;
  // Whether the current attempt has shown progress yet.
  bool progressed() const { return current_ && current_->first_progress.has_value(); }

 private:
  struct AttemptTimes {
    AttemptTimes();  // Out of line: clang cannot default-construct a nested type's NSDMIs in-class.
    SteadyTime started;
    std::optional<SteadyTime> restore_began;
    std::optional<SteadyTime> first_progress;
    std::optional<SteadyTime> last_progress;
    std::optional<SteadyTime> ended;
    AttemptEnd how = AttemptEnd::kOther;
    bool settled = false;  // Its progress is accounted (succeeded, or the next one started).
    // (step, time) with increasing steps: every `stride`-th older sample in
    // `history`, then the newest ones in `recent`.
    std::vector<std::pair<std::int64_t, SteadyTime>> history;
    std::deque<std::pair<std::int64_t, SteadyTime>> recent;
    std::size_t stride = 1;
    std::size_t evicted = 0;  // Samples that have left `recent`.

    void AddSample(std::int64_t step, SteadyTime time);
    std::optional<std::int64_t> last_sample_step() const;
    // When the attempt first reached `step`, if it did (to within the spacing).
    std::optional<SteadyTime> FirstReached(std::int64_t step) const;
  };

  void Add(BadputCause cause, Seconds amount, GoodputFigures& to) const;
  // Startup/restore of an attempt that has not shown progress by `until`.
  void AddStartup(const AttemptTimes& a, SteadyTime until, GoodputFigures& to) const;
  // The settled split of an ended attempt's progress, given the next resume step.
  void AddProgress(const AttemptTimes& a, std::optional<std::int64_t> resume_step, bool known,
                   GoodputFigures& to) const;

  GoodputFigures settled_;
  std::optional<AttemptTimes> current_;
  std::optional<SteadyTime> recovery_since_;  // Wanted, between attempts.
};

}  // namespace tpud
