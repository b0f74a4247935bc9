#include "daemon/classify/classifier.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/classify/builtin_rules.h"
#include "daemon/common/lines.h"

namespace tpud {

// Every rule both alone (to report its own parse error, and as a fallback
// should the set's DFA ever run out of memory) and in one set (the fast path).
struct FailureClassifier::Compiled {
  explicit Compiled(const RE2::Options& options)
      : set(options, RE2::UNANCHORED), block_set(options, RE2::UNANCHORED) {}
  RE2::Set set;
  // The same patterns in multi-line mode, for MayMatchLines; unused (and
  // `block_set_usable` false) when a pattern anchors to the text's ends.
  RE2::Set block_set;
  bool block_set_usable = true;
  std::vector<std::unique_ptr<RE2>> regexps;
};

namespace {

// Room for the set's lazily built DFA (RE2's default is 8 MiB), so many user
// rules never exhaust it; if it does fill, FirstMatch matches rule by rule.
constexpr int64_t kMaxRegexpMemoryBytes = 64 << 20;

RE2::Options RuleOptions() {
  RE2::Options options;
  options.set_log_errors(false);  // Errors are returned as statuses instead.
  options.set_max_mem(kMaxRegexpMemoryBytes);
  return options;
}

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
  // Compile time: ../shared/reference/cloud-tpu.md §5 (troubleshooting guide).
  verdict.hint =
      "no output or step progress before the hang timeout: resetting the TPU and restarting; "
      "compiling a large model can take 5+ minutes, so raise the timeout if it was compiling";
  return verdict;
}

}  // namespace

FailureClassifier::~FailureClassifier() = default;

absl::StatusOr<std::shared_ptr<const FailureClassifier>> FailureClassifier::Create(
    std::vector<FailureRule> user_rules) {
  std::shared_ptr<FailureClassifier> classifier(new FailureClassifier());
  classifier->user_rule_count_ = user_rules.size();
  classifier->rules_ = std::move(user_rules);
  for (std::size_t i = 0; i < classifier->user_rule_count_; ++i) {
    classifier->rule_ids_.push_back(absl::StrCat("user:", i));
  }
  for (const BuiltinRule& builtin : BuiltinRules()) {
    classifier->rules_.push_back(builtin.rule);
    classifier->rule_ids_.push_back(absl::StrCat("builtin:", builtin.name));
  }
  if (absl::Status status = classifier->CompileRules(); !status.ok()) return status;
  return std::shared_ptr<const FailureClassifier>(std::move(classifier));
}

absl::StatusOr<std::shared_ptr<const FailureClassifier>> FailureClassifier::Shared(
    const std::vector<FailureRule>& user_rules) {
  static std::mutex mu;
  static std::map<std::vector<FailureRule>, std::weak_ptr<const FailureClassifier>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (std::shared_ptr<const FailureClassifier> found = cache[user_rules].lock()) return found;
  absl::StatusOr<std::shared_ptr<const FailureClassifier>> created = Create(user_rules);
  if (!created.ok()) return created;
  for (auto it = cache.begin(); it != cache.end();) {  // Forget classifiers no job uses.
    it = it->second.expired() ? cache.erase(it) : std::next(it);
  }
  cache[user_rules] = *created;
  return created;
}

absl::Status FailureClassifier::CompileRules() {
  const RE2::Options options = RuleOptions();
  auto compiled = std::make_unique<Compiled>(options);
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const std::string& pattern = rules_[i].match;
    const std::string where = i < user_rule_count_
                                  ? absl::StrCat("failure_rules[", i, "].match")
                                  : absl::StrCat("built-in rule ", rule_ids_[i]);
    if (pattern.empty()) return absl::InvalidArgumentError(where + ": must not be empty");
    auto regexp = std::make_unique<RE2>(pattern, options);
    if (!regexp->ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", regexp->error()));
    }
    std::string error;
    if (compiled->set.Add(pattern, &error) != static_cast<int>(i)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", error));
    }
    compiled->regexps.push_back(std::move(regexp));
    if (absl::StrContains(pattern, "\\A") || absl::StrContains(pattern, "\\z")) {
      compiled->block_set_usable = false;
    } else if (compiled->block_set.Add(absl::StrCat("(?m)", pattern), &error) != static_cast<int>(i)) {
      compiled->block_set_usable = false;
    }
  }
  if (compiled->block_set_usable && !compiled->block_set.Compile()) compiled->block_set_usable = false;
  if (!compiled->set.Compile()) {
    return absl::InternalError(absl::StrCat("failure rules: RE2 could not compile the ",
                                            rules_.size(), " rules into one set (out of "
                                            "memory); simplify the failure_rules"));
  }
  compiled_ = std::move(compiled);
  return absl::OkStatus();
}

int FailureClassifier::FirstMatch(std::string_view line, std::vector<int>* scratch) const {
  const re2::StringPiece text(line.data(), line.size());
  RE2::Set::ErrorInfo error{RE2::Set::kNoError};
  // First only "does anything match?": the DFA stops at the first match and,
  // without an output vector, the set allocates nothing.
  bool any = compiled_->set.Match(text, nullptr, &error);
  if (any) any = compiled_->set.Match(text, scratch, &error);
  if (any) return *std::min_element(scratch->begin(), scratch->end());
  if (error.kind == RE2::Set::kNoError) return -1;
  // The set's DFA gave up (out of memory): each RE2 falls back to the NFA.
  for (std::size_t i = 0; i < compiled_->regexps.size(); ++i) {
    if (RE2::PartialMatch(text, *compiled_->regexps[i])) return static_cast<int>(i);
  }
  return -1;
}

AttemptScanner::AttemptScanner(std::shared_ptr<const FailureClassifier> classifier)
    : classifier_(std::move(classifier)) {}

bool FailureClassifier::RuleMatches(std::size_t index, std::string_view line) const {
  return RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *compiled_->regexps[index]);
}

bool FailureClassifier::MayMatchLines(std::string_view lines) const {
  if (!compiled_->block_set_usable) return true;
  RE2::Set::ErrorInfo error{RE2::Set::kNoError};
  const bool any = compiled_->block_set.Match(re2::StringPiece(lines.data(), lines.size()), nullptr, &error);
  return any || error.kind != RE2::Set::kNoError;  // The DFA gave up: check line by line.
}

void AttemptScanner::ScanLines(std::string_view lines) {
  if (!classifier_->MayMatchLines(lines)) return;
  ForEachLine(lines, [this](std::string_view line) { ScanLine(line); });
}

void AttemptScanner::ScanLine(std::string_view line) {
  if (best_index_ == 0) {  // Nothing can outrank rule 0: only its last line can change.
    if (classifier_->RuleMatches(0, line)) AssignTruncated(line, &best_line_);
    return;
  }
  const int index = classifier_->FirstMatch(line, &scratch_);
  if (index < 0 || (best_index_ >= 0 && index > best_index_)) return;
  best_index_ = index;
  AssignTruncated(line, &best_line_);
}

const FailureRule* AttemptScanner::best_match() const {
  return best_index_ < 0 ? nullptr : &classifier_->rules()[best_index_];
}

Classification AttemptScanner::Classify(const ExitStatus& exit, bool hung) const {
  if (best_index_ >= 0) {
    const FailureRule& rule = classifier_->rules()[best_index_];
    Classification verdict;
    verdict.failure_class = rule.failure_class;
    verdict.action = rule.action;
    verdict.hint = rule.hint;
    verdict.matched_line = best_line_;
    verdict.rule = classifier_->rule_id(best_index_);
    return verdict;
  }
  if (hung) return HangVerdict();
  return ClassifyExit(exit);
}

}  // namespace tpud
