// Unix group lookups through NSS (getgrnam_r/getgrgid_r, see getgrnam(3)).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace tpud {

// The gid of `name_or_number`: a group name known to NSS ("tpud"), or a
// decimal gid ("1001", taken as is even when no group has it).
// Errors: InvalidArgument "no such group \"tpud\"" for an unknown name or an
// empty string; Internal when NSS itself fails (message names the errno).
// Thread-safety: thread-safe (reentrant NSS calls).
absl::StatusOr<gid_t> LookUpGroup(const std::string& name_or_number);

// The name of group `gid`, or its number as text when NSS knows none.
// Thread-safety: thread-safe.
std::string GroupName(gid_t gid);

}  // namespace tpud
