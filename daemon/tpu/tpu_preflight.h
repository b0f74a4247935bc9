// TpuPreflight: gathers the facts the TPU checks judge (tpu_checks.h) and
// turns them into what the job state machine and `tpuctl doctor` need:
//   Check  - before each attempt (JobDeps::preflight): devices and holders
//            from this host, the node from TpuRecovery's cache (never the
//            network), the job's environment; a PreflightVerdict.
//   Doctor - the same checks with the node described afresh, for humans.
#pragma once

#include <vector>

#include "daemon/core/job_spec.h"
#include "daemon/tpu/reset_request.h"
#include "daemon/tpu/local_control.h"
#include "daemon/tpu/tpu_checks.h"
#include "daemon/tpu/tpu_recovery.h"

namespace tpud {

// Thread-safety: Check and Doctor may run concurrently from any threads (they
// share only const state and TpuRecovery, which is thread-safe).
class TpuPreflight {
 public:
  // A cached node older than this is not trusted: the node check is skipped.
  static constexpr Seconds kNodeCacheTtl{300};

  // `recovery` (may be null: no node check) must outlive this.
  TpuPreflight(TpuConfig config, TpuPreflightPolicy policy, TpuRecovery* recovery);

  // The verdict for launching `spec` now: the first failing check's "name:
  // detail" as FailedPrecondition, with the reset that may fix it. Scans
  // /proc for the device holders (milliseconds), and asks TpuRecovery to
  // refresh its cached node for next time. `supervised_pgids`: the process
  // groups of tpud's live attempts.
  PreflightVerdict Check(const JobSpec& spec, const std::vector<int>& supervised_pgids) const;

  // The whole checklist for `spec`, describing the node now (blocks: not on
  // the loop thread). `own_pgid`: the job's own live attempt (its holding the
  // TPU is fine), 0 for none. A node that cannot be described fails.
  std::vector<TpuCheck> Doctor(const JobSpec& spec, const std::vector<int>& supervised_pgids, int own_pgid,
                               CancelToken* cancel) const;

 private:
  TpuFacts HostFacts(const JobSpec& spec, const std::vector<int>& supervised_pgids, int own_pgid) const;

  const TpuConfig config_;
  const TpuPreflightPolicy policy_;
  TpuRecovery* const recovery_;
  const LocalTpuControl local_;  // Only FindHolders: no signal is ever sent from here.
};

// The environment a job's attempt gets: tpud's own, overridden by spec.env.
std::map<std::string, std::string> JobEnvironment(const JobSpec& spec);

}  // namespace tpud
