#include "daemon/supervisor/goodput.h"

#include <algorithm>

namespace tpud {

GoodputLedger::AttemptTimes::AttemptTimes() = default;

std::string_view BadputCauseName(BadputCause cause) {
  switch (cause) {
    case BadputCause::kStartup:
      return "startup";
    case BadputCause::kCheckpointRestore:
      return "checkpoint_restore";
    case BadputCause::kWastedProgress:
      return "wasted_progress";
    case BadputCause::kRecovery:
      return "recovery";
    case BadputCause::kHangDetection:
      return "hang_detection";
  }
  return "unknown";
}

Seconds GoodputFigures::wall() const {
  Seconds total = productive;
  for (Seconds s : badput) total += s;
  return total;
}

std::optional<double> GoodputFigures::ratio() const {
  const Seconds total = wall();
  if (total <= Seconds(0)) return std::nullopt;
  return productive / total;
}

void GoodputLedger::Add(BadputCause cause, Seconds amount, GoodputFigures& to) const {
  if (amount > Seconds(0)) to.badput[static_cast<std::size_t>(cause)] += amount;
}

void GoodputLedger::AddStartup(const AttemptTimes& a, SteadyTime until, GoodputFigures& to) const {
  const SteadyTime restore = std::clamp(a.restore_began.value_or(until), a.started, until);
  Add(BadputCause::kStartup, restore - a.started, to);
  Add(BadputCause::kCheckpointRestore, until - restore, to);
}

void GoodputLedger::AddProgress(const AttemptTimes& a, std::optional<std::int64_t> resume_step, bool known,
                                GoodputFigures& to) const {
  const SteadyTime first = *a.first_progress;
  // A hung attempt's silence is hang_detection (added when it ended).
  const SteadyTime end = a.how == AttemptEnd::kHung ? *a.last_progress : *a.ended;
  SteadyTime kept = end;
  if (known && a.last_sample_step()) {
    if (!resume_step) {
      kept = first;  // The next attempt started from scratch: all of it is redone.
    } else {
      // Not reached: the checkpoint holds more than the last step we saw.
      kept = a.FirstReached(*resume_step).value_or(*a.last_progress);
    }
  } else if (known) {
    kept = *a.last_progress;  // No steps: what came after the last progress line is lost.
  }
  kept = std::clamp(kept, first, std::max(first, end));
  to.productive += kept - first;
  Add(BadputCause::kWastedProgress, end - kept, to);
}

void GoodputLedger::OnAttemptStart(SteadyTime now, std::optional<std::int64_t> resume_step) {
  if (current_ && !current_->ended) OnAttemptEnd(now, AttemptEnd::kOther);
  if (recovery_since_) {
    Add(BadputCause::kRecovery, now - *recovery_since_, settled_);
    recovery_since_.reset();
  }
  if (current_ && !current_->settled) AddProgress(*current_, resume_step, /*known=*/true, settled_);
  current_.emplace();
  current_->started = now;
}

void GoodputLedger::OnRestoreBegin(SteadyTime now) {
  if (!current_ || current_->ended || current_->first_progress || current_->restore_began) return;
  current_->restore_began = now;
}

void GoodputLedger::OnProgress(SteadyTime now, std::optional<std::int64_t> step) {
  if (!current_ || current_->ended) return;
  AttemptTimes& a = *current_;
  if (!a.first_progress) {
    AddStartup(a, now, settled_);
    a.first_progress = now;
  }
  a.last_progress = now;
  const std::optional<std::int64_t> last = a.last_sample_step();
  if (step && (!last || *step > *last)) a.AddSample(*step, now);
}

void GoodputLedger::AttemptTimes::AddSample(std::int64_t step, SteadyTime time) {
  recent.emplace_back(step, time);
  if (recent.size() <= kRecentSamples) return;
  const auto oldest = recent.front();
  recent.pop_front();
  if (evicted++ % stride != 0) return;
  history.push_back(oldest);
  if (history.size() < kHistorySamples) return;
  std::size_t out = 0;  // Full: keep every other one, twice as far apart from now on.
  for (std::size_t i = 0; i < history.size(); i += 2) history[out++] = history[i];
  history.resize(out);
  stride *= 2;
}

std::optional<std::int64_t> GoodputLedger::AttemptTimes::last_sample_step() const {
  if (!recent.empty()) return recent.back().first;
  return std::nullopt;
}

std::optional<SteadyTime> GoodputLedger::AttemptTimes::FirstReached(std::int64_t step) const {
  auto reached = [step](const auto& sample) { return sample.first >= step; };
  if (auto it = std::find_if(history.begin(), history.end(), reached); it != history.end()) return it->second;
  if (auto it = std::find_if(recent.begin(), recent.end(), reached); it != recent.end()) return it->second;
  return std::nullopt;
}

void GoodputLedger::OnAttemptEnd(SteadyTime now, AttemptEnd how) {
  if (!current_ || current_->ended) return;
  AttemptTimes& a = *current_;
  a.ended = now;
  a.how = how;
  if (!a.first_progress) {
    if (how == AttemptEnd::kHung) {
      Add(BadputCause::kHangDetection, now - a.started, settled_);
    } else {
      AddStartup(a, now, settled_);
    }
    a.settled = true;  // No progress to settle.
  } else if (how == AttemptEnd::kHung) {
    Add(BadputCause::kHangDetection, now - *a.last_progress, settled_);
  } else if (how == AttemptEnd::kSucceeded) {
    settled_.productive += now - *a.first_progress;
    a.settled = true;
  }
  recovery_since_ = now;
}

void GoodputLedger::OnIdle(SteadyTime now) {
  if (!recovery_since_) return;
  Add(BadputCause::kRecovery, now - *recovery_since_, settled_);
  recovery_since_.reset();
}

GoodputFigures GoodputLedger::Figures(SteadyTime now) const {
  GoodputFigures figures = settled_;
  if (current_ && !current_->settled) {
    const AttemptTimes& a = *current_;
    if (a.ended) {
      AddProgress(a, std::nullopt, /*known=*/false, figures);  // Kept, until the next start says.
    } else if (!a.first_progress) {
      AddStartup(a, now, figures);
    } else {
      figures.productive += now - *a.first_progress;
    }
  }
  if (recovery_since_) Add(BadputCause::kRecovery, now - *recovery_since_, figures);
  return figures;
}

}  // namespace tpud
