// Failure classification: why did an attempt fail, and what should the
// supervisor do about it?
//
// A FailureClassifier holds the rules — a job's `failure_rules:` first, in
// order, then the built-in Cloud TPU signatures (builtin_rules.h) — compiled
// once into a single RE2::Set. Each attempt gets an AttemptScanner that sees
// every output line (ScanLine/ScanLines) and, when the attempt ends, decides
// (Classify).
//
// Precedence. Every line that matches a rule is a candidate; the verdict is
// the best candidate by, in order:
//   1. user rules before built-in rules; among user rules, the lower index;
//   2. decisive before weak evidence (built-in rules only). A line is weak
//      evidence when it declares INFO, WARNING or DEBUG severity
//      (line_severity.h: glog/absl "I0000 ...", TF "...: W tensorflow/...",
//      Python "WARNING:absl:") and the rule is not marked any_severity; an
//      unmarked line (a Python exception, a shell message) is decisive. Weak
//      evidence decides only when no line was decisive, and never decides a
//      `fail` action: a warning is too little to throw a run away;
//   3. the rule's tier: cause, then symptom, then generic wrapper (so an
//      F-line wrapping "Core halted" is hardware, and an HBM OOM followed by
//      the CHECK failure it causes is hbm_oom);
//   4. the earlier line: the first error of a burst wins over its later
//      consequences (device busy, then the CPU fallback it causes, is
//      device_busy);
//   5. within one line, the earlier rule (rules() order).
// A line matching a built-in lookalike rule is no candidate for any built-in
// rule (user rules still see it). Then, when no line was a candidate:
//   6. if the supervisor declared the attempt hung: hang, reset_and_restart;
//   7. else the exit status: SIGABRT/SIGSEGV/SIGBUS/SIGILL/SIGFPE -> crash,
//      restart; any other signal or exit code (or spawn error) -> unknown, restart.
// Rule ids in Classification::rule: "user:<i>" for failure_rules[i],
// "builtin:<name>", "hang", "exit:signal SIGABRT", "exit:code 1", "exit:spawn_error".
//
// Usage:
//   auto classifier = FailureClassifier::Create(spec.failure_rules);  // at config load
//   AttemptScanner scanner(*classifier);                               // per attempt
//   ... scanner.ScanLines(block) from AttemptObserver::OnOutputLines ...
//   Classification verdict = scanner.Classify(exit_status, hung);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/classify/builtin_rules.h"
#include "daemon/core/failure_rule.h"
#include "daemon/core/exit_status.h"

namespace tpud {

// How a rule takes part in the precedence above.
struct RuleTraits {
  bool user = false;           // From the job's failure_rules.
  RuleTier tier = RuleTier::kGeneric;  // Built-in rules only.
  bool any_severity = false;   // Decisive on INFO/WARNING lines too (always true for user rules).
  bool lookalike = false;      // Built-in lookalike: disqualifies the line for built-in rules.
};

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
  const RuleTraits& traits(std::size_t index) const { return traits_[index]; }
  std::size_t user_rule_count() const { return user_rule_count_; }

  // Whether any rule matches `line`. Allocation-free; the hot path. Thread-safe.
  bool AnyMatch(std::string_view line) const;
  // The indices of all rules matching `line`, ascending, into `out` (its
  // contents are overwritten; reuse it to avoid allocating). Thread-safe.
  void Matches(std::string_view line, std::vector<int>* out) const;
  // False only when no rule matches any line of `lines` (lines ending in
  // '\n'): one pass of the set over the whole block, with ^ and $ at line
  // boundaries, where AnyMatch per line would make one call per line. True
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
  std::vector<RuleTraits> traits_;
  std::size_t user_rule_count_ = 0;
  std::unique_ptr<Compiled> compiled_;
};

// The per-attempt scan. NOT thread-safe: one per attempt, used from one thread
// (the supervisor's event loop). Keeps the classifier alive.
class AttemptScanner {
 public:
  explicit AttemptScanner(std::shared_ptr<const FailureClassifier> classifier);

  // Checks one output line (without its '\n') against every rule and counts
  // it. The hot path: no allocation unless the line matches a rule and beats
  // the best candidate so far. Once a decisive candidate of the best possible
  // rank is held (user rule 0; with no user rules, a cause) nothing can
  // outrank it, so later lines are only counted.
  void ScanLine(std::string_view line);
  // The same for each line of `lines` (each ending in '\n'; a last line
  // without one counts too), skipping the matching of a block no rule can
  // match (FailureClassifier::MayMatchLines).
  void ScanLines(std::string_view lines);

  // The rule of the best candidate so far (see the file comment), or nullptr.
  // Lets the supervisor act before the attempt ends.
  const FailureRule* best_match() const;
  // Lines scanned so far.
  std::size_t lines_scanned() const { return lines_scanned_; }

  // The verdict for the attempt that ended with `exit` (see the file comment
  // for the order of decision); `hung` says the supervisor stopped it for lack
  // of progress. Meant for failed attempts: a clean exit 0 with no matching
  // line yields unknown/restart like any other exit code. May be called more
  // than once; does not change the scanner.
  Classification Classify(const ExitStatus& exit, bool hung) const;

 private:
  // The best line so far for one kind of evidence.
  struct Candidate {
    int rule = -1;                      // Index into rules(); -1: none yet.
    std::uint32_t rank = UINT32_MAX;    // Lower is better: user index, else users + tier.
    std::size_t line_number = 0;
    std::string line;                   // Truncated to Classification::kMaxMatchedLineBytes.
  };

  void ConsiderLine(std::string_view line);
  std::uint32_t Rank(int rule) const;
  static void Offer(Candidate* slot, int rule, std::uint32_t rank, std::size_t line_number,
                    std::string_view line);
  const Candidate* Best() const;

  std::shared_ptr<const FailureClassifier> classifier_;
  Candidate decisive_;
  Candidate weak_;
  std::size_t lines_scanned_ = 0;
  std::vector<int> scratch_;  // Reused by Matches.
};

}  // namespace tpud
