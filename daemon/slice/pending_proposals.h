// Gang proposals that must not be lost with this tpud: a person's stop and a
// worker's leave. A stop made while etcd is down must still stop the gang
// after this tpud restarts; otherwise the gang, still "running" in etcd,
// starts the job here again. Kept in one file, written and fsync'd before
// Add returns, until etcd has the proposal (or it is moot).
//
// File: state_dir/slice-proposals.json (records.h EncodePendingProposals).
// Thread-safety: thread-safe.
#pragma once

#include <filesystem>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/slice/records.h"

namespace tpud::slice {

class PendingProposals {
 public:
  // `path` empty: nothing is kept (tests without a state_dir).
  explicit PendingProposals(std::filesystem::path path);

  // Whether `proposal` must be kept (a stop or a leave).
  static bool MustKeep(const GangProposal& proposal);

  // The proposals a previous tpud left; a file that cannot be read or
  // parsed is an error naming it (nothing is dropped silently), and one
  // that cannot be parsed is moved to PATH.damaged, out of the next Add's way.
  absl::StatusOr<std::vector<PendingProposal>> Load();
  // Keeps `proposal` (when MustKeep). Errors: the file could not be written.
  absl::Status Add(const std::string& job, const GangProposal& proposal);
  // Forgets the first kept proposal equal to this one: etcd has it.
  absl::Status Remove(const std::string& job, const GangProposal& proposal);

 private:
  absl::Status Save() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::filesystem::path path_;
  absl::Mutex mu_;
  std::vector<PendingProposal> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tpud::slice
