#include "daemon/supervisor/progress.h"

#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/durations.h"
#include "daemon/core/lines.h"

namespace tpud {
namespace {

std::optional<std::int64_t> ParseStep(std::string_view digits) {
  std::int64_t step = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

Seconds ToSeconds(double s) { return Seconds(s); }

}  // namespace

absl::StatusOr<ProgressTracker> ProgressTracker::Create(const ProgressSpec& spec, SteadyTime attempt_start) {
  if (absl::Status s = ValidateProgressSpec(spec); !s.ok()) return s;
  std::unique_ptr<RE2> re;
  if (!spec.regex.empty()) re = std::make_unique<RE2>(spec.regex, RE2::Quiet);
  return ProgressTracker(spec, attempt_start, std::move(re));
}

ProgressTracker::ProgressTracker(const ProgressSpec& spec, SteadyTime attempt_start, std::unique_ptr<RE2> re)
    : spec_(spec), attempt_start_(attempt_start), re_(std::move(re)) {
  regex_has_group_ = re_ != nullptr && re_->NumberOfCapturingGroups() >= 1;
  if (re_ != nullptr && !absl::StrContains(spec_.regex, "\\A") && !absl::StrContains(spec_.regex, "\\z")) {
    lines_re_ = std::make_unique<RE2>(absl::StrCat("(?m)", spec_.regex), RE2::Quiet);
    if (!lines_re_->ok()) lines_re_.reset();
  }
}

ProgressTracker::ProgressTracker(ProgressTracker&&) noexcept = default;
ProgressTracker& ProgressTracker::operator=(ProgressTracker&&) noexcept = default;
ProgressTracker::~ProgressTracker() = default;

bool ProgressTracker::OnOutputLine(std::string_view line, SteadyTime now) {
  if (!spec_.configured) return false;
  if (re_ == nullptr) {
    if (!spec_.heartbeat_file.empty()) return false;  // Only the heartbeat counts.
    RecordProgress(now);
    return true;
  }
  re2::StringPiece input(line.data(), line.size());
  re2::StringPiece group;
  const bool matched =
      regex_has_group_ ? RE2::PartialMatch(input, *re_, &group) : RE2::PartialMatch(input, *re_);
  if (!matched) return false;
  RecordProgress(now);
  if (!regex_has_group_) {
    RecordTick(now);
    return true;
  }
  std::optional<std::int64_t> step = ParseStep(std::string_view(group.data(), group.size()));
  if (step && step != last_step_) {
    last_step_ = step;
    RecordTick(now);
  }
  return true;
}

bool ProgressTracker::OnOutputLines(std::string_view lines, SteadyTime now) {
  if (!spec_.configured || lines.empty()) return false;
  // Without a regex only the fact of output matters, not which line.
  if (re_ == nullptr) return OnOutputLine(lines, now);
  if (lines_re_ != nullptr && !RE2::PartialMatch(re2::StringPiece(lines.data(), lines.size()), *lines_re_)) {
    return false;
  }
  bool counted = false;
  ForEachLine(lines, [&](std::string_view line) { counted = OnOutputLine(line, now) || counted; });
  return counted;
}

void ProgressTracker::OnHeartbeat(SteadyTime now) {
  if (!spec_.configured) return;
  RecordProgress(now);
  if (re_ == nullptr) RecordTick(now);
}

void ProgressTracker::RecordProgress(SteadyTime now) {
  last_progress_ = last_progress_ ? std::max(*last_progress_, now) : now;
}

void ProgressTracker::RecordTick(SteadyTime now) {
  if (last_tick_ && now >= *last_tick_) {
    longest_interval_ = std::max(longest_interval_, Seconds(now - *last_tick_));
    ++intervals_;
  }
  last_tick_ = now;
}

bool ProgressTracker::Enabled() const {
  return spec_.configured && (spec_.timeout_seconds > 0 || spec_.learn_timeout);
}

std::optional<Seconds> ProgressTracker::learned_timeout() const {
  if (!spec_.learn_timeout || intervals_ < spec_.min_steps) return std::nullopt;
  Seconds learned = std::max(kMinLearnedTimeout, spec_.safety_factor * longest_interval_);
  if (spec_.timeout_seconds > 0) learned = std::min(learned, ToSeconds(spec_.timeout_seconds));
  return learned;
}

Seconds ProgressTracker::effective_timeout() const {
  if (!Enabled()) return Seconds(0);
  if (std::optional<Seconds> learned = learned_timeout()) return *learned;
  return ToSeconds(spec_.timeout_seconds);
}

std::optional<SteadyTime> ProgressTracker::Deadline() const {
  if (!Enabled()) return std::nullopt;
  if (!last_progress_) {
    const Seconds startup = ToSeconds(std::max(spec_.startup_grace_seconds, spec_.timeout_seconds));
    if (startup <= Seconds(0)) return std::nullopt;
    return attempt_start_ + ToNanos(startup);
  }
  const Seconds timeout = effective_timeout();
  if (timeout <= Seconds(0)) return std::nullopt;
  return *last_progress_ + ToNanos(timeout);
}

}  // namespace tpud
