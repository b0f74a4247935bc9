// The wire protocol between tpud and tpud-shim (containerd's daemon/shim split,
// see containerd docs/runtime-v2.md). A daemon must be able to re-attach to
// shims started by an older tpud, so this protocol only ever grows: frame
// types and JSON keys are never reused or changed, and unknown ones are
// skipped. The files in the attempt directory are in attempt_dir.h.
//
// 1. Readiness. The daemon starts `tpud-shim ATTEMPT_DIR` with stdout and
//    stderr on one pipe, which it reads to end of file. The shim detaches
//    (setsid, double fork), starts the trainer, listens on ATTEMPT_DIR/shim.sock
//    and writes state.json, then writes exactly one JSON line and closes the pipe:
//      {"ready":{"shim_pid":N,"trainer_pid":M}}
//      {"error":{"code":C,"message":"spawn \"/no/such\": No such file or directory"}}
//    where C is an absl::StatusCode number. Anything else on the pipe (a crash
//    message) is a diagnostic.
//
// 2. The socket (unix stream, ATTEMPT_DIR/shim.sock). One daemon connection
//    at a time: while a connected daemon is still there, a second connection
//    is closed at once (only after the first one's peer has hung up does a
//    new connection take its place). Frames:
//      [type: 1 byte][payload length: uint32 little-endian][payload]
//    shim -> daemon:
//      'O' output: bytes of the trainer's stdout+stderr, in order, each already
//          in the log. Bytes not yet sent wait in a buffer (kStreamBufferBytes)
//          for this or the next connection; beyond that they are dropped from
//          the stream (never from the log).
//      'D' dropped: uint64 LE, the number of bytes missing from the stream at
//          this point (dropped, or lost with an earlier connection). The
//          stream resumes at the start of a line: the daemon discards the
//          partial line it holds.
//      'L' log health: JSON {"dropped_bytes":N,"dropping":true|false}, sent when
//          the job log starts dropping output (a full disk) and when it
//          writes again; N counts every byte this attempt's log lost so far.
//      'X' exit: the exit status as JSON (same keys as exit.json), sent after
//          all output and after exit.json is durable. The shim exits once it
//          has written it, or when the daemon disconnects, or after 10 s;
//          with no daemon connected it exits at once, except that it first
//          waits (up to 10 s) for the launching daemon's first connection.
//    daemon -> shim:
//      'S' signal: int32 LE. The shim sends it to the trainer's process group
//          while the trainer is unreaped; afterwards it is ignored (the group
//          is gone, and its pgid may belong to someone else). Daemons since
//          protocol 2 signal the group themselves (state.json has the
//          trainer's start time to check it is the same process), so a busy
//          shim never delays a stop; the frame remains for older daemons.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/core/exit_status.h"

namespace tpud::shim {

inline constexpr int kProtocolVersion = 2;  // 2: start times and cgroup in state.json, 'L' frames.
inline constexpr std::size_t kFrameHeaderBytes = 5;
inline constexpr std::uint32_t kMaxFramePayloadBytes = 1 << 20;
inline constexpr std::size_t kStreamBufferBytes = 4 << 20;

enum class FrameType : char { kOutput = 'O', kDropped = 'D', kLogHealth = 'L', kExit = 'X', kSignal = 'S' };

// Header followed by payload. `payload` must not exceed kMaxFramePayloadBytes.
std::string EncodeFrame(FrameType type, std::string_view payload);
// The payload length in a kFrameHeaderBytes header.
std::uint32_t DecodeFrameLength(const char* header);

std::string EncodeUint64(std::uint64_t value);
std::string EncodeInt32(std::int32_t value);
// nullopt when `payload` has the wrong size.
std::optional<std::uint64_t> DecodeUint64(std::string_view payload);
std::optional<std::int32_t> DecodeInt32(std::string_view payload);

// {"code":3,"signal":0,"core_dumped":false,"spawn_error":"","trainer_pid":N}.
std::string ExitStatusToJson(const ExitStatus& status, int trainer_pid);
// Sets *trainer_pid when given (-1 if absent).
// Errors: InvalidArgument when `json` is not such an object.
absl::StatusOr<ExitStatus> ExitStatusFromJson(std::string_view json, int* trainer_pid = nullptr);

// The 'L' frame's payload.
struct LogHealth {
  std::uint64_t dropped_bytes = 0;
  bool dropping = false;
};
std::string LogHealthToJson(const LogHealth& health);
// Errors: InvalidArgument when `json` is not such an object.
absl::StatusOr<LogHealth> LogHealthFromJson(std::string_view json);

// What the shim reports on its stdout once the trainer runs.
struct ShimReady {
  int shim_pid = -1;
  int trainer_pid = -1;
};
// One line each, '\n'-terminated.
std::string EncodeReady(const ShimReady& ready);
std::string EncodeReadyError(const absl::Status& error);
// Parses everything the shim wrote before closing its stdout: the ready line,
// or its error as an absl::Status with the shim's code and message; Internal
// ("tpud-shim reported nothing: <text>") when there is no such line.
absl::StatusOr<ShimReady> ParseReadyReport(std::string_view report);

}  // namespace tpud::shim
