#include "daemon/classify/classifier.h"
#include "daemon/core/limits.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/classify/builtin_rules.h"
#include "daemon/classify/line_severity.h"

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
// rules never exhaust it; if it does fill, Matches matches rule by rule.

RE2::Options RuleOptions() {
  RE2::Options options;
  options.set_log_errors(false);  // Errors are returned as statuses instead.
  options.set_max_mem(kMaxRegexpMemoryBytes);
  return options;
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
    classifier->traits_.push_back({.user = true, .any_severity = true});
  }
  for (const BuiltinRule& builtin : BuiltinRules()) {
    classifier->rules_.push_back(builtin.rule);
    classifier->rule_ids_.push_back(absl::StrCat("builtin:", builtin.name));
    classifier->traits_.push_back({.user = false,
                                   .tier = builtin.tier,
                                   .any_severity = builtin.any_severity,
                                   .lookalike = builtin.lookalike});
  }
  if (absl::Status status = classifier->CompileRules(); !status.ok()) return status;
  ParseLineSeverity("");  // Compiles its regexps now rather than on an attempt's first match.
  return std::shared_ptr<const FailureClassifier>(std::move(classifier));
}

absl::StatusOr<std::shared_ptr<const FailureClassifier>> FailureClassifier::Shared(
    const std::vector<FailureRule>& user_rules) {
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  static std::map<std::vector<FailureRule>, std::weak_ptr<const FailureClassifier>> cache;
  absl::MutexLock lock(&mu);
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

bool FailureClassifier::AnyMatch(std::string_view line) const {
  RE2::Set::ErrorInfo error{RE2::Set::kNoError};
  // Without an output vector the DFA stops at the first match and the set
  // allocates nothing.
  const bool any = compiled_->set.Match(re2::StringPiece(line.data(), line.size()), nullptr, &error);
  return any || error.kind != RE2::Set::kNoError;  // The DFA gave up: let Matches decide.
}

void FailureClassifier::Matches(std::string_view line, std::vector<int>* out) const {
  const re2::StringPiece text(line.data(), line.size());
  RE2::Set::ErrorInfo error{RE2::Set::kNoError};
  out->clear();
  if (compiled_->set.Match(text, out, &error)) {
    std::sort(out->begin(), out->end());
    return;
  }
  out->clear();
  if (error.kind == RE2::Set::kNoError) return;
  // The set's DFA gave up (out of memory): each RE2 falls back to the NFA.
  for (std::size_t i = 0; i < compiled_->regexps.size(); ++i) {
    if (RE2::PartialMatch(text, *compiled_->regexps[i])) out->push_back(static_cast<int>(i));
  }
}

bool FailureClassifier::MayMatchLines(std::string_view lines) const {
  if (!compiled_->block_set_usable) return true;
  RE2::Set::ErrorInfo error{RE2::Set::kNoError};
  const bool any = compiled_->block_set.Match(re2::StringPiece(lines.data(), lines.size()), nullptr, &error);
  return any || error.kind != RE2::Set::kNoError;  // The DFA gave up: check line by line.
}

}  // namespace tpud
