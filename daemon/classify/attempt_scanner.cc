// AttemptScanner: the per-attempt half of classifier.h, which documents the
// order of precedence implemented here.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <csignal>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/classify/classifier.h"
#include "daemon/classify/line_severity.h"
#include "daemon/core/lines.h"

namespace tpud {
namespace {

// `line` cut to Classification::kMaxMatchedLineBytes without splitting a
// UTF-8 sequence.
void AssignTruncated(std::string_view line, std::string* out) {
  std::size_t size = line.size();
  if (size > Classification::kMaxMatchedLineBytes) {
    size = Classification::kMaxMatchedLineBytes;
    while (size > 0 && (static_cast<unsigned char>(line[size]) & 0xC0) == 0x80) --size;
  }
  out->assign(line.data(), size);
}

// The number of '\n' bytes in `text`: sixteen at a time with SSE2 (part of
// every x86-64 CPU), else eight at a time, counting a word's zero bytes after
// XOR with "\n\n..." by the exact high-bit trick of
// graphics.stanford.edu/~seander/bithacks.html#ZeroInWord. Skipped blocks
// must still be counted for line numbers, so this is on the hot path.
std::size_t CountNewlines(std::string_view text) {
  std::size_t count = 0;
  std::size_t i = 0;
#if defined(__SSE2__)
  // Per-byte counters (a match compares as -1, so subtracting adds 1), summed
  // by _mm_sad_epu8 before any of them can pass 255.
  const __m128i newlines = _mm_set1_epi8('\n');
  while (i + 16 <= text.size()) {
    __m128i counters = _mm_setzero_si128();
    for (int round = 0; round < 255 && i + 16 <= text.size(); ++round, i += 16) {
      const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
      counters = _mm_sub_epi8(counters, _mm_cmpeq_epi8(chunk, newlines));
    }
    const __m128i sums = _mm_sad_epu8(counters, _mm_setzero_si128());
    count += static_cast<std::size_t>(_mm_cvtsi128_si64(sums)) +
             static_cast<std::size_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums)));
  }
#endif
  constexpr std::uint64_t kNewlines = 0x0a0a0a0a0a0a0a0aULL;
  constexpr std::uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fULL;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    word ^= kNewlines;
    const std::uint64_t zero_bytes = ~(((word & kLow7) + kLow7) | word | kLow7);
    count += static_cast<std::size_t>(__builtin_popcountll(zero_bytes));
  }
  for (; i < text.size(); ++i) count += text[i] == '\n' ? 1 : 0;
  return count;
}

// The number of lines ForEachLine would visit in `lines`.
std::size_t CountLines(std::string_view lines) {
  if (lines.empty()) return 0;
  return CountNewlines(lines) + (lines.back() == '\n' ? 0 : 1);
}

bool IsCrashSignal(int signal) {
  return signal == SIGABRT || signal == SIGSEGV || signal == SIGBUS || signal == SIGILL ||
         signal == SIGFPE;
}

Classification ClassifyExit(const ExitStatus& exit) {
  Classification verdict;
  verdict.failure_class = FailureClass::kUnknown;
  verdict.action = RecoveryAction::kRestart;
  if (!exit.spawn_error.empty()) {
    verdict.rule = "exit:spawn_error";
    verdict.hint = absl::StrCat("the trainer could not be started: ", exit.spawn_error);
  } else if (exit.signal != 0 && IsCrashSignal(exit.signal)) {
    verdict.failure_class = FailureClass::kCrash;
    verdict.rule = absl::StrCat("exit:signal ", SignalName(exit.signal));
    verdict.hint = absl::StrCat("the trainer was ", exit.Describe(),
                                ": restarting from the newest checkpoint; if it crashes again "
                                "at the same step, the failure is deterministic");
  } else if (exit.signal != 0) {
    verdict.rule = absl::StrCat("exit:signal ", SignalName(exit.signal));
    verdict.hint = absl::StrCat("the trainer was ", exit.Describe(),
                                exit.signal == SIGKILL
                                    ? " (if tpud did not send it, perhaps the kernel's OOM "
                                      "killer: see dmesg)"
                                    : "",
                                " and its output shows no known failure; see its log");
  } else {
    verdict.rule = absl::StrCat("exit:code ", exit.code);
    verdict.hint = absl::StrCat("the trainer ended with ", exit.Describe(),
                                " and its output shows no known failure; see its log");
  }
  return verdict;
}

Classification HangVerdict() {
  Classification verdict;
  verdict.failure_class = FailureClass::kHang;
  verdict.action = RecoveryAction::kResetAndRestart;
  verdict.rule = "hang";
  // Compile time: the Cloud TPU troubleshooting guide (cloud.google.com/tpu/docs/troubleshooting).
  verdict.hint =
      "no output or step progress before the hang timeout: resetting the TPU and restarting; "
      "compiling a large model can take 5+ minutes, so raise the timeout if it was compiling";
  return verdict;
}

}  // namespace

AttemptScanner::AttemptScanner(std::shared_ptr<const FailureClassifier> classifier)
    : classifier_(std::move(classifier)) {}

void AttemptScanner::ScanLines(std::string_view lines) {
  if (decisive_.rank == 0 || !classifier_->MayMatchLines(lines)) {
    lines_scanned_ += CountLines(lines);
    return;
  }
  ForEachLine(lines, [this](std::string_view line) { ScanLine(line); });
}

void AttemptScanner::ScanLine(std::string_view line) {
  ++lines_scanned_;
  if (decisive_.rank == 0) return;  // User rule 0 matched: nothing can outrank it.
  if (!classifier_->AnyMatch(line)) return;
  classifier_->Matches(line, &scratch_);
  ConsiderLine(line);
}

std::uint32_t AttemptScanner::Rank(int rule) const {
  const RuleTraits& traits = classifier_->traits(static_cast<std::size_t>(rule));
  if (traits.user) return static_cast<std::uint32_t>(rule);
  return static_cast<std::uint32_t>(classifier_->user_rule_count()) +
         static_cast<std::uint32_t>(traits.tier);
}

// Finds this line's best decisive and best weak rule among scratch_ (ascending
// indices, so the first of equal rank is the earlier rule) and offers them.
void AttemptScanner::ConsiderLine(std::string_view line) {
  bool lookalike = false;
  for (int rule : scratch_) lookalike = lookalike || classifier_->traits(rule).lookalike;
  bool severity_known = false;
  LineSeverity severity = LineSeverity::kUnmarked;
  int best[2] = {-1, -1};  // [0]: decisive, [1]: weak.
  for (int rule : scratch_) {
    const RuleTraits& traits = classifier_->traits(static_cast<std::size_t>(rule));
    if (traits.lookalike || (lookalike && !traits.user)) continue;
    if (!traits.any_severity && !severity_known) {
      severity = ParseLineSeverity(line);
      severity_known = true;
    }
    const bool decisive = traits.any_severity || IsErrorSeverity(severity);
    if (!decisive && classifier_->rules()[rule].action == RecoveryAction::kFail) continue;
    int& slot = best[decisive ? 0 : 1];
    if (slot < 0 || Rank(rule) < Rank(slot)) slot = rule;
  }
  if (best[0] >= 0) Offer(&decisive_, best[0], Rank(best[0]), lines_scanned_, line);
  if (best[1] >= 0) Offer(&weak_, best[1], Rank(best[1]), lines_scanned_, line);
}

// Ties keep the earlier line: the first error of a burst is its cause.
void AttemptScanner::Offer(Candidate* slot, int rule, std::uint32_t rank, std::size_t line_number,
                           std::string_view line) {
  if (slot->rule >= 0 && rank >= slot->rank) return;
  slot->rule = rule;
  slot->rank = rank;
  slot->line_number = line_number;
  AssignTruncated(line, &slot->line);
}

const AttemptScanner::Candidate* AttemptScanner::Best() const {
  if (decisive_.rule >= 0) return &decisive_;
  if (weak_.rule >= 0) return &weak_;
  return nullptr;
}

const FailureRule* AttemptScanner::best_match() const {
  const Candidate* best = Best();
  return best == nullptr ? nullptr : &classifier_->rules()[best->rule];
}

Classification AttemptScanner::Classify(const ExitStatus& exit, bool hung) const {
  if (const Candidate* best = Best()) {
    const FailureRule& rule = classifier_->rules()[best->rule];
    Classification verdict;
    verdict.failure_class = rule.failure_class;
    verdict.action = rule.action;
    verdict.hint = rule.hint;
    verdict.matched_line = best->line;
    verdict.matched_line_number = best->line_number;
    verdict.rule = classifier_->rule_id(best->rule);
    return verdict;
  }
  if (hung) return HangVerdict();
  return ClassifyExit(exit);
}

}  // namespace tpud
