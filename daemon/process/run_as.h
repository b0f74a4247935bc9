// Who an attempt runs as: a job spec's `user:` and `group:`, resolved through
// the user and group databases (NSS: getpwnam_r(3), getgrnam_r(3),
// getgrouplist(3)) before the launch, never in the child.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

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

// The uid `user` names (a name or a decimal uid). Errors as ResolveRunAs.
absl::StatusOr<uid_t> LookUpUid(const std::string& user);

// The name of `uid`, or its number as text when the database has none.
std::string UserName(uid_t uid);

}  // namespace tpud
