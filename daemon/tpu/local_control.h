// The "local" backend: frees this host's TPU without the cloud. Source for the
// procedure: reference §4 ("find processes holding the device files (scan
// /proc/<pid>/fd), stop them by pid, remove the stale lockfile").
//
// Reset:
//   1. holders = processes with a device file (TpuConfig::device_globs) or the
//      lock file open, plus the lockf owner of the lock file (device_holders.h);
//   2. if any holder is spared (TpuCall::spare_pids / spare_pgids: tpud's own
//      attempts), fail with FailedPrecondition before signalling anything;
//   3. signal each holder by pid (a pidfd, so a recycled pid is never hit)
//      with stop_signals in order, waiting stop_grace_seconds after each for
//      it to exit; then scan again, until no process holds a device (newcomers
//      are stopped too) or timeout_seconds pass;
//   4. remove the lock file if stale (RemoveStaleLockFile).
// This process is never a holder. Processes tpud may not inspect (not root)
// are counted and reported in progress, not signalled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/tpu/device_holders.h"
#include "daemon/tpu/tpu_control.h"

namespace tpud {

// Thread-safety: as TpuControl; concurrent Resets would signal the same pids.
class LocalTpuControl final : public TpuControl {
 public:
  LocalTpuControl(TpuConfig config, std::shared_ptr<WaitClock> clock);

  // Unimplemented: there is no node to describe locally.
  absl::StatusOr<TpuNode> Describe(CancelToken* cancel) override;
  // Errors: FailedPrecondition (a spared holder, or a lock file still held),
  // PermissionDenied (may not signal a holder), DeadlineExceeded (a holder
  // survived the ladder, or devices still held at the timeout), Cancelled.
  absl::Status Reset(const TpuCall& call) override;
  // Unimplemented: starting a node needs the api or gcloud backend.
  absl::Status Start(const TpuCall& call) override;
  std::string name() const override { return "local"; }

  // Current holders of the devices and the lock file (step 1), for status
  // pages and tests. Reports unreadable processes through `call`.
  absl::StatusOr<std::vector<FileHolder>> FindHolders(const TpuCall& call) const;

 private:
  absl::Status StopHolders(const std::vector<FileHolder>& holders, const Deadline& deadline,
                           const TpuCall& call);
  absl::Status FreeDevices(const Deadline& deadline, const TpuCall& call);

  const TpuConfig config_;
  const std::shared_ptr<WaitClock> clock_;
};

}  // namespace tpud
