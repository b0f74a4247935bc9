// What every tpuctl command shares: the session it runs in, one way to make
// a unary call, and one way to print.
#pragma once

#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "client/connection.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud::client {

// What every command needs. Not owned: the stub and streams must outlive the
// call. `timeout` bounds each unary call and each stream that is not followed.
struct Session {
  tpud::v1::Supervisor::StubInterface* stub = nullptr;
  std::string socket_path;                  // For error messages and `info`.
  std::chrono::duration<double> timeout{10};
  std::ostream* out = nullptr;              // Results (stdout).
  std::ostream* err = nullptr;              // Notes that are not failures (stderr).
  bool err_is_tty = false;                  // Progress of long waits is drawn in place (client/progress.h).
};

// How long a unary call may take: session.timeout, or until SIGINT (for a
// call that lasts as long as what it asks for, like a TPU reset).
enum class CallBound { kTimeout, kUntilInterrupted };

// Sets `context`'s deadline to now + `timeout`.
void SetDeadline(grpc::ClientContext& context, std::chrono::duration<double> timeout);

// The unary call `method` of the session's stub with `request`, filling
// `*response`. Result::Ok(), or the failure mapped by ResultFromStatus.
template <typename Request, typename Response>
Result Call(const Session& session,
            grpc::Status (tpud::v1::Supervisor::StubInterface::*method)(grpc::ClientContext*, const Request&,
                                                                        Response*),
            const Request& request, Response* response, CallBound bound = CallBound::kTimeout);

// Writes `text` to session.out and flushes it; an error Result when the
// output is gone (a closed pipe), so a follow ends.
Result Print(const Session& session, std::string_view text);

// ---------------------------------------------------------------------------

Result CallWithContext(const Session& session, grpc::ClientContext& context, CallBound bound,
                       const std::function<grpc::Status(grpc::ClientContext*)>& call);

template <typename Request, typename Response>
Result Call(const Session& session,
            grpc::Status (tpud::v1::Supervisor::StubInterface::*method)(grpc::ClientContext*, const Request&,
                                                                        Response*),
            const Request& request, Response* response, CallBound bound) {
  grpc::ClientContext context;
  return CallWithContext(session, context, bound, [&](grpc::ClientContext* ctx) {
    return (session.stub->*method)(ctx, request, response);
  });
}

}  // namespace tpud::client
