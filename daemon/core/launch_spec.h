// What a launcher is asked to start: one attempt of a job, fully resolved
// (argv with resume args, env, working dir, log, user, cgroup). Built by the
// Job, carried to the shim in spec.json (shim/wire/attempt_dir.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

namespace tpud {

// Who an attempt runs as (job spec `user:`/`group:`), resolved by tpud before
// the launch so nothing between fork and exec needs the user database.
struct RunAs {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;  // Supplementary groups (initgroups(3) of `user`).
  std::string user;                   // Name for USER/LOGNAME; the uid as text when unnamed.
  std::filesystem::path home;         // For HOME; "/" when the user database has none.

  bool operator==(const RunAs&) const = default;
};

// Whether a variable of the daemon's environment reaches a job launched with
// clean_environment: PATH, HOME, USER, LOGNAME (a run_as user's own replace
// them), LANG, LANGUAGE, LC_*, TZ, TMPDIR, TERM, and the
// TPU runtime's settings (names starting TPU_, XLA_, JAX_, LIBTPU_, PJRT_,
// TF_CPP_). Anything else a job needs goes in its spec's `env`.
bool IsInheritedVariable(absl::string_view name);

struct LaunchSpec {
  std::string job;
  int attempt = 0;
  // Unset: the attempt runs as tpud does. Set: its groups, gid and uid are
  // set in the child before exec (a failure there fails the spawn: it never
  // runs with tpud's privileges), HOME, USER and LOGNAME come from it unless
  // `env` sets them, and the log file is owned by it.
  std::optional<RunAs> run_as;
  // A cgroup v2 directory the trainer is moved into before exec (empty: none).
  // Ending the attempt then ends every process in it (cgroup.kill), however
  // far it escaped (process/attempt_cgroup.h).
  std::filesystem::path cgroup;
  std::vector<std::string> argv;             // argv[0] without a '/' is looked up in PATH.
  std::filesystem::path working_dir;
  std::map<std::string, std::string> env;    // Set on top of the daemon's environment.
  // True (every trainer): the daemon's environment is not passed on, only
  // the variables IsInheritedVariable allows (PATH, locale, TZ, TMPDIR, the
  // TPU runtime's TPU_/XLA_/JAX_/LIBTPU_/PJRT_/TF_ settings), then `env`.
  // tpud's own secrets (access tokens, proxy credentials) never reach a job.
  // False: the whole environment, as for tpud-shim itself.
  bool clean_environment = false;
  std::filesystem::path log_path;            // Combined stdout+stderr is appended here.
  std::uint64_t log_max_bytes = 50ull << 20; // Rotate past this size (0: never).
  int log_backups = 10;                      // Keep log_path.1 .. log_path.N.
};

}  // namespace tpud
