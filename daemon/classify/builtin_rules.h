// The built-in failure rules: the Cloud TPU failure signatures tpud knows
// without any configuration. Each rule's strings are cited, next to it, from
// a public source (an issue thread where a real job printed them, or the file
// that prints them); tests/data/real-tpu-errors.tsv holds real lines for them.
//
// How several matching rules are ranked (classifier.h has the whole order):
//   * tier: a specific cause (kCause: HBM OOM, a user error, device busy, a
//     halted core, preemption, CPU fallback) outranks a symptom that is often
//     another worker's failure seen from here (kSymptom: barrier/heartbeat
//     timeouts, lost connections), which outranks a generic wrapper
//     (kGeneric: CHECK failures, fatal log lines, crash signals, a bare
//     UNAVAILABLE or DEADLINE_EXCEEDED status);
//   * any_severity: the signature decides even on an INFO or WARNING line
//     (libtpu logs "already in use" at INFO, JAX warns of its CPU fallback);
//     other rules matched on such lines are only weak evidence;
//   * lookalike: not a failure but a line that resembles one (a "taking a long
//     time" warning, metadata retries, cuInit on a TPU host); a line matching
//     a lookalike rule never decides through a built-in rule.
// Within one line, the lower tier wins, then the earlier rule in this list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/core/failure_rule.h"

namespace tpud {

enum class RuleTier : std::uint8_t {
  kCause = 0,    // The failure itself.
  kSymptom = 1,  // Often the consequence of a failure elsewhere (a peer died, a barrier waited).
  kGeneric = 2,  // A wrapper that says something failed, not what.
};

struct BuiltinRule {
  std::string name;  // Stable id, reported as "builtin:<name>" (e.g. "builtin:hbm_oom").
  FailureRule rule;
  RuleTier tier = RuleTier::kGeneric;
  bool any_severity = false;  // Decides on INFO/WARNING lines too.
  bool lookalike = false;     // Marks a line as not a failure; never decides itself.
};

// The built-in rules in order (see above). Every pattern is valid RE2 (a unit
// test compiles them) and every non-lookalike rule has a hint. Thread-safety:
// the vector is built once, never changes and is never destroyed.
const std::vector<BuiltinRule>& BuiltinRules();

}  // namespace tpud
