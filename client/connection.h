// Connecting to tpud's unix socket and turning failures into tpuctl's exit
// codes and one-line messages (see client/tpuctl.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "client/tpuctl.h"

namespace tpud::client {

// Where the socket is when neither --socket nor $TPUD_SOCKET says.
inline constexpr char kDefaultSocketPath[] = "/run/tpud/tpud.sock";

// How a command ended: an exit code and, unless it is kExitOk, one line for
// stderr (without the "tpuctl: " prefix and without a newline).
struct Result {
  int exit_code = kExitOk;
  std::string message;

  static Result Ok() { return {}; }
  bool ok() const { return exit_code == kExitOk; }
};

// Whether tpud will refuse this process, judged from the socket file the way
// tpud's access policy judges a peer (rpc/peer_auth.h: root, the socket's
// owner, or a member of its group): the message tpud would give, e.g.
// "permission denied: uid 65534 is not root nor in group tpud"; nullopt when
// this process may connect (or the socket cannot be examined).
std::optional<std::string> PredictDenial(const std::string& socket_path);

// The message for an unreachable daemon:
//   "cannot reach tpud at PATH: REASON (is tpud running? set --socket or TPUD_SOCKET)"
std::string UnreachableMessage(const std::string& socket_path, const std::string& reason);

// Maps a failed RPC to an exit code and message:
//   UNAVAILABLE -> kExitUnreachable with UnreachableMessage (the reason is the
//                  status message);
//   NOT_FOUND -> kExitNotFound, INVALID_ARGUMENT -> kExitInvalidArgument, both
//                  with the server's message as is (e.g. `unknown job "x"`);
//   DEADLINE_EXCEEDED -> kExitError, "no answer from tpud within Ns (see --timeout)";
//   anything else -> kExitError, "<server message>" or "<code name>" when empty.
// Newlines in the server's message become "; " so the result stays one line.
// An OK status gives Result::Ok().
Result ResultFromStatus(const grpc::Status& status, const std::string& socket_path,
                        std::chrono::duration<double> timeout);

// Why a connect(2) to the unix socket at `path` fails, e.g. "No such file or
// directory", "Connection refused", "Permission denied"; empty when it
// succeeds (the probe connection is closed at once). Blocking, but a unix
// socket connect does not wait on the network.
std::string ProbeUnixSocket(const std::string& path);

// Opens a channel to "unix:<socket_path>" and waits until it is ready, at
// most `connect_timeout`. Fails fast (without waiting out the timeout) when
// the channel reports a transient failure, e.g. no socket file. On failure
// returns kExitUnreachable with the reason from ProbeUnixSocket (or "timed out
// after Ns" when the socket accepts but gRPC does not get ready) and leaves
// `*channel` null.
Result Connect(const std::string& socket_path, std::chrono::duration<double> connect_timeout,
               std::shared_ptr<grpc::Channel>* channel);

}  // namespace tpud::client
