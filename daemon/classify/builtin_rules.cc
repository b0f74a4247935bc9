#include "daemon/classify/builtin_rules.h"

#include "daemon/classify/builtin_rule_specs.h"

namespace tpud {

const std::vector<BuiltinRule>& BuiltinRules() {
  static const std::vector<BuiltinRule>* const rules = [] {
    auto* built = new std::vector<BuiltinRule>();
    for (auto family : {builtin_rules::DeterministicRuleSpecs(), builtin_rules::InfrastructureRuleSpecs(),
                        builtin_rules::SymptomRuleSpecs(), builtin_rules::GenericRuleSpecs()}) {
      for (const builtin_rules::RuleSpec& spec : family) {
        built->push_back({spec.name,
                          FailureRule{spec.match, spec.failure_class, spec.action, spec.hint},
                          spec.tier, spec.any_severity, spec.lookalike});
      }
    }
    return built;
  }();
  return *rules;
}

}  // namespace tpud
