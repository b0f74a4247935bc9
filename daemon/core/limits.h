// Limits on what one job spec may hold, however it arrived (config file,
// `tpuctl start -f`, ad hoc request). They keep a spec within what execve(2)
// accepts, so a launch never fails for size alone, and they bound what tpud
// copies while reading a spec (a YAML alias repeated many times must not make
// gigabytes of argv). daemon/config/validate.cc enforces them on every spec;
// the YAML reader stops reading a list or map once past kMaxExecBytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpud {

// One argv or environment string, in bytes: Linux's MAX_ARG_STRLEN (32 pages,
// include/uapi/linux/binfmts.h); execve fails with E2BIG beyond it.
inline constexpr std::size_t kMaxArgBytes = 128 << 10;
// All of argv (command + resume_args) and env ("KEY=VALUE") together, in bytes.
// Linux allows a quarter of the stack rlimit (execve(2): 2 MiB with the usual
// 8 MiB stack) for argv and the whole environment, which the job also
// inherits from tpud: half of that is left to the inherited part.
inline constexpr std::size_t kMaxExecBytes = 1 << 20;
// Entries of command + resume_args, and of env.
inline constexpr std::size_t kMaxArgCount = 32768;
inline constexpr std::size_t kMaxEnvCount = 8192;
// A path (working_dir, checkpoint.dir, ...), in bytes: PATH_MAX - 1.
inline constexpr std::size_t kMaxPathBytes = 4095;

// A config file or job spec file, in bytes (a spec sent over the socket is
// limited further, to 256 KiB: rpc/request_limits.h).
inline constexpr std::uint64_t kMaxConfigFileBytes = 1 << 20;
// Memory RE2 may use for one compiled failure rule or rule set (RE2::Options::
// set_max_mem): a pathological user pattern fails to compile instead of
// taking the daemon's memory.
inline constexpr std::int64_t kMaxRegexpMemoryBytes = 64 << 20;
// log.backups: rotated files kept. Each rotation renames them all.
inline constexpr int kMaxLogBackups = 1000;
// log.max_bytes: the smallest size a job log rotates at.
inline constexpr std::uint64_t kMinLogMaxBytes = 64 << 10;

}  // namespace tpud
