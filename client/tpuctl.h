// tpuctl: the command-line client of tpud, talking gRPC (proto/tpud/v1/tpud.proto)
// over the daemon's unix socket.
//
// Usage: tpuctl [--socket PATH] [--timeout SECONDS] COMMAND [ARGS]
//   The socket is --socket, else $TPUD_SOCKET, else /run/tpud/tpud.sock.
//
// Exit codes (stable; scripts rely on them):
//   0   success; also when `logs -f` / `events -f` is ended with Ctrl-C (SIGINT
//       cancels the stream and tpuctl exits cleanly).
//   1   any other failure: an RPC failed with a code not listed below
//       (FAILED_PRECONDITION, PERMISSION_DENIED, DEADLINE_EXCEEDED, INTERNAL...),
//       or writing the output failed.
//   2   tpud is unreachable: no socket, nobody listening, or the call came back
//       UNAVAILABLE.
//   3   the job does not exist (NOT_FOUND).
//   4   the daemon rejected the request (INVALID_ARGUMENT), e.g. a bad job spec.
//   64  usage error: bad flags or arguments (EX_USAGE from sysexits.h).
//   66  an input file given on the command line cannot be read (EX_NOINPUT).
// Every failure prints exactly one line on stderr, starting with "tpuctl: ".
#pragma once

namespace tpud::client {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUnreachable = 2,
  kExitNotFound = 3,
  kExitInvalidArgument = 4,
  kExitUsage = 64,
  kExitNoInput = 66,
};

// Parses argv, runs the chosen command against the daemon and returns the
// process exit code (above). Prints results on stdout and errors on stderr.
// --help and --version print on stdout and return kExitOk.
// Installs a SIGINT handler while a followed stream (`-f`) is open.
// Thread-safety: call once, from main().
int RunTpuctl(int argc, char** argv);

}  // namespace tpud::client
