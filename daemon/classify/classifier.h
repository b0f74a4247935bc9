// Failure classification: why did an attempt fail, and what should the
// supervisor do about it?
//
// A FailureClassifier holds the rules — a job's `failure_rules:` first, in
// order, then the built-in Cloud TPU signatures (builtin_rules.h) — compiled
// once into a single RE2::Set. Each attempt gets an AttemptScanner that sees
// every output line (ScanLine) and, when the attempt ends, decides (Classify):
//   1. the highest-priority rule (lowest index) that matched any line, with
//      the last line it matched;
//   2. else, if the supervisor declared the attempt hung: hang, reset_and_restart;
//   3. else the exit status: SIGABRT/SIGSEGV/SIGBUS/SIGILL/SIGFPE -> crash,
//      restart; any other signal or exit code (or spawn error) -> unknown, restart.
// Rule ids in Classification::rule: "user:<i>" for failure_rules[i],
// "builtin:<name>", "hang", "exit:signal SIGABRT", "exit:code 1", "exit:spawn_error".
//
// Usage:
//   auto classifier = FailureClassifier::Create(spec.failure_rules);  // at config load
//   AttemptScanner scanner(*classifier);                               // per attempt
//   ... scanner.ScanLine(line) from AttemptObserver::OnOutputLine ...
//   Classification verdict = scanner.Classify(exit_status, hung);
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/classify/failure_rule.h"
#include "daemon/launch/launcher.h"

namespace tpud {

// The compiled rules. Immutable after Create; thread-safe to share between
// attempts and threads (RE2 matching is const and thread-safe).
class FailureClassifier {
 public:
  // Compiles `user_rules` (in order; they take priority over every built-in
  // rule) followed by BuiltinRules(). Errors: InvalidArgument naming the rule
  // and RE2's message for a bad regex, e.g.
  //   failure_rules[2].match: missing ): (abc
  // or for an empty one "failure_rules[0].match: must not be empty" (an empty
  // pattern would match every line). Internal if RE2 cannot compile the set.
  static absl::StatusOr<std::shared_ptr<const FailureClassifier>> Create(
      std::vector<FailureRule> user_rules);
  // Create, but jobs with the same user rules (most have none) share one
  // classifier while any of them holds it: each costs ~150 KB of compiled
  // RE2 programs and DFA cache. Thread-safe.
  static absl::StatusOr<std::shared_ptr<const FailureClassifier>> Shared(
      const std::vector<FailureRule>& user_rules);

  ~FailureClassifier();
  FailureClassifier(const FailureClassifier&) = delete;
  FailureClassifier& operator=(const FailureClassifier&) = delete;

  // All rules in priority order: the user rules, then the built-in ones.
  const std::vector<FailureRule>& rules() const { return rules_; }
  // "user:<i>" or "builtin:<name>" for rules()[index]; index < rules().size().
  const std::string& rule_id(std::size_t index) const { return rule_ids_[index]; }
  std::size_t user_rule_count() const { return user_rule_count_; }

  // The lowest index of a rule matching `line`, or -1 when none does.
  // `scratch` is reused storage (its contents are overwritten). Allocation-free
  // when nothing matches, which is nearly every line. Thread-safe.
  int FirstMatch(std::string_view line, std::vector<int>* scratch) const;
  // Whether rules()[index] matches `line`; index < rules().size(). Thread-safe.
  bool RuleMatches(std::size_t index, std::string_view line) const;
  // False only when no rule matches any line of `lines` (lines ending in
  // '\n'): one pass of the set over the whole block, with ^ and $ at line
  // boundaries, where FirstMatch per line would make one call per line. True
  // is only a maybe (a class like \s can match across a '\n'); then check
  // line by line. Always true when a rule uses \A or \z, which mean
  // something else in a block. Thread-safe.
  bool MayMatchLines(std::string_view lines) const;

 private:
  struct Compiled;  // The RE2 objects; defined in classifier.cc.

  FailureClassifier() = default;
  // Compiles rules_ into compiled_; the errors of Create.
  absl::Status CompileRules();

  std::vector<FailureRule> rules_;
  std::vector<std::string> rule_ids_;
  std::size_t user_rule_count_ = 0;
  std::unique_ptr<Compiled> compiled_;
};

// The per-attempt scan. NOT thread-safe: one per attempt, used from one thread
// (the supervisor's event loop). Keeps the classifier alive.
class AttemptScanner {
 public:
  explicit AttemptScanner(std::shared_ptr<const FailureClassifier> classifier);

  // Checks one output line (without its '\n') against every rule. The hot
  // path: no allocation unless the line matches a rule at least as important
  // as the best so far. Once rule 0 has matched nothing can outrank it, so
  // later lines are only checked against rule 0 (to report its last line).
  void ScanLine(std::string_view line);
  // The same for each line of `lines` (each ending in '\n'), skipping a
  // block no rule can match (FailureClassifier::MayMatchLines).
  void ScanLines(std::string_view lines);

  // The most important rule matched so far, or nullptr. Lets the supervisor act
  // before the attempt ends (e.g. stop a job that fell back to the CPU).
  const FailureRule* best_match() const;

  // The verdict for the attempt that ended with `exit` (see the file comment
  // for the order of decision); `hung` says the supervisor stopped it for lack
  // of progress. Meant for failed attempts: a clean exit 0 with no matching
  // line yields unknown/restart like any other exit code. May be called more
  // than once; does not change the scanner.
  Classification Classify(const ExitStatus& exit, bool hung) const;

 private:
  std::shared_ptr<const FailureClassifier> classifier_;
  int best_index_ = -1;     // Lowest rule index matched so far; -1: none.
  std::string best_line_;   // The last line that matched best_index_ (truncated).
  std::vector<int> scratch_;  // Reused by FirstMatch.
};

}  // namespace tpud
