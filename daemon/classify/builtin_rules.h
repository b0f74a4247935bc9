// The built-in failure rules: the Cloud TPU failure signatures tpud knows
// without any configuration (../shared/reference/cloud-tpu.md §5 and §4; each
// rule's own source is cited next to it in builtin_rules.cc).
#pragma once

#include <string>
#include <vector>

#include "daemon/classify/failure_rule.h"

namespace tpud {

struct BuiltinRule {
  std::string name;  // Stable id, reported as "builtin:<name>" (e.g. "builtin:hbm_oom").
  FailureRule rule;
};

// The built-in rules in priority order (earlier wins when several match in one
// attempt): deterministic and specific signatures first, generic crash markers
// last, so an HBM OOM followed by the `Check failed` abort it causes is hbm_oom.
//   preemption, hbm_oom, hbm_oom_runtime, local_filesystem, infeed_dtype,
//   dynamic_shape, unsupported_op, cross_shard_optimizer, device_busy, hardware,
//   deadline_exceeded, connection, cpu_fallback, crash
// Every pattern is valid RE2 (a unit test compiles them). Thread-safety: the
// vector is built once, never changes and is never destroyed; safe from any thread.
const std::vector<BuiltinRule>& BuiltinRules();

}  // namespace tpud
