// The built-in rules as constant tables, one table per family of failures;
// builtin_rules.cc joins them in this order into BuiltinRules(). Internal to
// daemon/classify: everything else sees only BuiltinRules().
#pragma once

#include <span>

#include "daemon/classify/builtin_rules.h"
#include "daemon/core/failure_rule.h"

namespace tpud::builtin_rules {

struct RuleSpec {
  const char* name;
  const char* match;  // RE2.
  FailureClass failure_class;
  RecoveryAction action;
  RuleTier tier;
  bool any_severity;
  bool lookalike;
  const char* hint;
};

// Short names for the tables.
using FC = FailureClass;
using RA = RecoveryAction;
inline constexpr RuleTier kCause = RuleTier::kCause;
inline constexpr RuleTier kSymptom = RuleTier::kSymptom;
inline constexpr RuleTier kGeneric = RuleTier::kGeneric;

// hbm_oom and user_error: the rules whose action is `fail`, so each pattern is
// kept to wording that only a deterministic failure prints.
std::span<const RuleSpec> DeterministicRuleSpecs();
// preemption, device_busy, hardware and cpu_fallback.
std::span<const RuleSpec> InfrastructureRuleSpecs();
// deadline_exceeded and connection by their specific wording.
std::span<const RuleSpec> SymptomRuleSpecs();
// crash, bare status codes, and the lookalikes.
std::span<const RuleSpec> GenericRuleSpecs();

}  // namespace tpud::builtin_rules
