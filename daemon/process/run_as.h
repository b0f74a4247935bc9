// Who an attempt runs as: a job spec's `user:` and `group:`, resolved through
// the user and group databases (NSS: getpwnam_r(3), getgrnam_r(3),
// getgrouplist(3)) before the launch, never in the child.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/launch_spec.h"

namespace tpud {

// RunAs for `user` (a name or a decimal uid) and `group` (a name or a decimal
// gid; empty: the user's primary group, or the gid of the same number for an
// unnamed uid). Supplementary groups are the user's (initgroups(3) semantics)
// plus `group`. Both empty: nullopt (run as tpud). Only `group`: tpud's uid
// with that group.
// Errors: NotFound naming the user or group ("no such user \"x\"");
// Unavailable when NSS itself fails (a directory service down: retry later).
// Thread-safety: thread-safe.
absl::StatusOr<std::optional<RunAs>> ResolveRunAs(const std::string& user, const std::string& group);

// Reads the filesystem as `who` on the calling thread while it lives: the
// thread's fsuid, fsgid and supplementary groups become the user's, so the
// kernel's permission checks (and the loss of CAP_DAC_OVERRIDE that comes
// with a non-zero fsuid, capabilities(7)) are the user's own. For what tpud
// reads on a job's behalf, e.g. its checkpoint.dir. Raw syscalls: credentials
// are per thread in the kernel, and glibc's setgroups(3) would change every
// thread's (nptl's setxid broadcast). No change when `who` is nullopt or tpud
// is not root (it then reads as itself, which is no more than the user may).
// status(): Internal when the switch failed; the caller must then not read.
// A restore that fails aborts the process (it cannot go on as the user).
// Thread-safety: affects only the constructing thread; destroy it there.
class ScopedFsIdentity {
 public:
  explicit ScopedFsIdentity(const std::optional<RunAs>& who);
  ~ScopedFsIdentity();
  ScopedFsIdentity(const ScopedFsIdentity&) = delete;
  ScopedFsIdentity& operator=(const ScopedFsIdentity&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  void Restore();

  bool switched_ = false;
  uid_t saved_fsuid_ = 0;
  gid_t saved_fsgid_ = 0;
  std::vector<gid_t> saved_groups_;
  absl::Status status_;
};

// The uid `user` names (a name or a decimal uid). Errors as ResolveRunAs.
absl::StatusOr<uid_t> LookUpUid(const std::string& user);

// The name of `uid`, or its number as text when the database has none.
std::string UserName(uid_t uid);

}  // namespace tpud
