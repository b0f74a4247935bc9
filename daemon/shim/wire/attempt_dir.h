// The attempt directory, STATE_DIR/attempts/JOB/ATTEMPT/: the state tpud and
// tpud-shim share on disk, so a restarted daemon can find its attempts again.
//   spec.json   the LaunchSpec; written by the daemon before it starts the shim.
//               Mode 0600, like every file here: it holds the job's env.
//   state.json  {"protocol":2,"shim_pid":N,"trainer_pid":M,"shim_start_ticks":S,
//               "trainer_start_ticks":T,"cgroup":"DIR"}; written by the shim
//               once the trainer runs, before it reports ready.
//   shim.sock   the shim's socket (protocol.h); removed when the shim exits.
//   shim.log    the shim's own diagnostics.
//   exit.json   the exit status (protocol.h ExitStatusToJson), written
//               atomically once the trainer has exited, its group has been
//               killed and its output drained into the log.
// The daemon removes the directory once it has delivered OnExit: a directory
// that exists is an exit not yet acknowledged. The JSON files are written with
// WriteFileAtomically.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/launch_spec.h"

namespace tpud::shim {

inline constexpr char kSpecFile[] = "spec.json";
inline constexpr char kStateFile[] = "state.json";
inline constexpr char kSocketFile[] = "shim.sock";
inline constexpr char kShimLogFile[] = "shim.log";
inline constexpr char kExitFile[] = "exit.json";

// STATE_DIR/attempts/JOB/ATTEMPT. Errors: InvalidArgument when `job` is not a
// job name (core/job_spec.h CheckJobName: never "", ".", ".." or with a
// '/'), or when the socket path would not fit in a sockaddr_un (108 bytes).
absl::StatusOr<std::filesystem::path> AttemptDir(const std::filesystem::path& state_dir,
                                                 std::string_view job, int attempt);

// Every STATE_DIR/attempts/JOB/ATTEMPT directory holding a spec.json, sorted.
// A missing attempts directory yields none.
std::vector<std::filesystem::path> ListAttemptDirs(const std::filesystem::path& state_dir);

// Writes `content` to path.tmp and renames it over `path`: a reader sees the
// old file or the new one, whole, and so does any process after a crash of
// the writer. Not fsynced: the files of an attempt directory describe
// processes that do not survive a power loss either, and an fsync (two, with
// the directory) on every attempt start and exit would sit on the restart
// path (README.md, Benchmarks). After a power loss tpud finds the attempt gone
// and restarts the job from its checkpoint (supervisor_restore.cc).
// Errors: Internal naming the path and the failed step.
absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view content);
// Errors: NotFound when missing; Internal when unreadable.
absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path);

// Errors: InvalidArgument when a string in `spec` is not UTF-8 (JSON cannot
// carry it exactly).
absl::StatusOr<std::string> SpecToJson(const LaunchSpec& spec);
// Errors: InvalidArgument naming the file when it is not a LaunchSpec.
absl::StatusOr<LaunchSpec> ReadSpecFile(const std::filesystem::path& path);
// The same from the file's text; `source` names it in errors.
absl::StatusOr<LaunchSpec> ParseSpecJson(std::string_view text, const std::string& source);

struct ShimState {
  int protocol = 0;
  int shim_pid = -1;
  int trainer_pid = -1;
  // Start times (field 22 of /proc/PID/stat, launch/process_tree.h): with the
  // pid they name the shim and the trainer for ever, so tpud never signals a
  // process that reused a pid. 0: unknown (written by a protocol 1 shim).
  std::uint64_t shim_start_ticks = 0;
  std::uint64_t trainer_start_ticks = 0;
  std::string cgroup;  // The attempt's cgroup directory; empty: none.
};
std::string ShimStateToJson(const ShimState& state);
// Errors: NotFound when missing; InvalidArgument when malformed.
absl::StatusOr<ShimState> ReadStateFile(const std::filesystem::path& path);
// The same from the file's text; `source` names it in errors.
absl::StatusOr<ShimState> ParseStateJson(std::string_view text, const std::string& source);

}  // namespace tpud::shim
