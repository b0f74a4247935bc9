// The TPU checks made before each attempt (preflight) and by `tpuctl doctor`:
// device files present (when tpu.preflight.require_devices), no foreign
// holder of the devices, the node READY and HEALTHY (when a node backend can
// tell), and the job's TPU variables sane. Pure: the caller gathers the
// facts (TpuFacts) and these functions judge them, each check with a one-line
// fix. Facts: node state and health from the Cloud TPU API (googleapis
// google/cloud/tpu/v2/cloud_tpu.proto); device files, lock file and environment
// variables from openxla/xla xla/stream_executor/tpu/tpu_initialize_util.cc and
// jax-ml/jax#10192.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/core/failure_rule.h"
#include "daemon/tpu/device_holders.h"
#include "daemon/tpu/tpu_control.h"

namespace tpud {

// One line of the checklist.
struct TpuCheck {
  std::string name;    // "devices", "holders", "node", "environment".
  bool ok = true;      // Skipped checks are ok, with a detail saying why.
  std::string detail;  // What was found: "node READY, HEALTHY", "held by pid 77 (python3)".
  std::string fix;     // One line for a human when !ok; empty when ok.
  // A reset that may fix a failing check, as the failure class the recovery
  // ladder (tpu_ladder.h) acts on: device_busy frees the devices, preemption
  // starts a stopped node or waits for READY, connection waits out
  // maintenance or resets an unhealthy node. nullopt: no reset helps.
  std::optional<FailureClass> reset_for;
};

// What the checks judge, gathered by the caller.
struct TpuFacts {
  std::vector<std::string> device_globs;  // tpu.device_globs.
  std::vector<std::string> devices;       // The existing paths they match (ExpandGlobs).
  bool require_devices = false;           // tpu.preflight.require_devices.
  // Processes holding the devices or lock file; nullopt when not scanned
  // (no local backend), with `holders_error` when the scan failed.
  std::optional<std::vector<FileHolder>> holders;
  std::string holders_error;
  std::map<int, int> holder_pgids;         // Holder pid -> its process group.
  std::set<int> supervised_pgids;          // Process groups of tpud's attempts.
  int own_pgid = 0;                        // The checked job's own live attempt; 0: none.
  // The node; nullopt when there is no node backend or its state is not
  // known (then `node_error` says why, or is empty for "no node backend").
  std::optional<TpuNode> node;
  std::string node_error;
  bool unknown_node_fails = false;         // Doctor: a node_error fails the check; preflight: skipped.
  std::string node_name;                   // tpu.name (empty: $TPU_NAME).
  // The job's environment: the daemon's, overridden by the spec's env.
  std::map<std::string, std::string> env;
};

// The four checks, in checklist order: devices, holders, node, environment.
std::vector<TpuCheck> RunTpuChecks(const TpuFacts& facts);

// The first failing check, or nullopt when all pass.
std::optional<TpuCheck> FirstFailure(const std::vector<TpuCheck>& checks);

}  // namespace tpud
