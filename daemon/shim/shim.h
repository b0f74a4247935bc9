// tpud-shim: the per-attempt process that is the trainer's parent, so the
// trainer outlives any restart, upgrade or crash of tpud (containerd's shim,
// docs/runtime-v2.md). The executable (daemon/shim_main.cc) only calls RunShim.
#pragma once

#include <filesystem>

namespace tpud::shim {

// Runs the shim for the attempt in `attempt_dir`, which holds spec.json
// (attempt_dir.h). Forks: the calling process returns 0 at once (tpud reaps
// it), and the grandchild of tpud, in a new session, does the rest:
// starts the trainer exactly as LocalLauncher would (spawn.h), listens on
// attempt_dir/shim.sock, writes state.json, reports readiness or the spawn
// error on stdout (protocol.h), points its stdin/stdout at /dev/null and its
// stderr at attempt_dir/shim.log, and serves (ShimServer) until the trainer's
// exit has been handed over. Returns the exit code for that process:
// 0 when the trainer ran (whatever its own exit code), 1 when it could not
// be started.
//
// The shim ignores SIGHUP, SIGINT, SIGTERM and SIGPIPE: it ends with its
// trainer, so to stop an attempt signal the trainer's process group.
int RunShim(const std::filesystem::path& attempt_dir);

// The same, but started ahead of need ("standby"): forks at once as above,
// then waits for one line on stdin naming the attempt directory and goes on
// as RunShim with it. So a launch pays neither the exec nor the start-up of
// a shim. End of file (or an empty line) first: the daemon went away or let
// it go, and it exits 0 having done nothing.
int RunStandbyShim();

}  // namespace tpud::shim
