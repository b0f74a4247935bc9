// One cgroup v2 per attempt, where tpud may create them: ending an attempt
// then ends every process it started, even those that left its process group
// (setsid) and were reparented away from the shim (cgroup.kill, Linux 5.14:
// https://docs.kernel.org/admin-guide/cgroup-v2.html, "cgroup.kill").
//
// tpud never takes a cgroup it was not given. With `cgroup_root: auto` it uses
// the cgroup systemd delegated to its unit (Delegate=yes; systemd marks a
// delegated cgroup with the extended attribute trusted.delegate or
// user.delegate = "1", systemd docs "Control Group APIs and Delegation"), and
// otherwise none; tests and hand-made setups name a directory instead. No
// controller is enabled: the attempt cgroups only group processes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/launch_spec.h"

namespace tpud {

// Where attempt cgroups go, from the config value `setting`:
//   "" or "none"  nullopt: no attempt cgroups.
//   "auto"        <own cgroup>/attempts when this process's cgroup v2 (from
//                 /proc/self/cgroup and the cgroup2 mount in
//                 /proc/self/mountinfo) is marked delegated, writable and has
//                 cgroup.kill; otherwise nullopt, and *why (when given) says
//                 what was missing.
//   a path        that directory (created if missing), which must lie on a
//                 cgroup2 filesystem and offer cgroup.kill once created.
// Errors (explicit paths only): FailedPrecondition naming the path and what is
// wrong ("not a cgroup2 filesystem", "no cgroup.kill (Linux < 5.14)", the
// mkdir error). Thread-safety: thread-safe.
absl::StatusOr<std::optional<std::filesystem::path>> ResolveCgroupRoot(const std::string& setting,
                                                                        std::string* why = nullptr);

// `root`/JOB/ATTEMPT, created (with its parents). Errors: Internal naming the
// directory and the mkdir error.
absl::StatusOr<std::filesystem::path> CreateAttemptCgroup(const std::filesystem::path& root,
                                                          std::string_view job, int attempt);

// SIGKILLs every process in `cgroup` and its descendants (writes "1" to
// cgroup.kill). OK when the directory is already gone.
absl::Status KillCgroup(const std::filesystem::path& cgroup);
// True when no process is left in `cgroup` ("populated 0" in cgroup.events),
// or the directory is gone.
bool CgroupEmpty(const std::filesystem::path& cgroup);
// Removes the (empty) cgroup directory; OK when it is already gone.
absl::Status RemoveCgroup(const std::filesystem::path& cgroup);

// `spec` with its cgroup set to a fresh attempt cgroup under `cgroup_root`
// (unchanged when the root is empty, or, with a warning, when the cgroup
// cannot be made: the attempt then runs without one).
LaunchSpec WithAttemptCgroup(LaunchSpec spec, const std::filesystem::path& cgroup_root);

}  // namespace tpud
