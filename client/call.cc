#include "client/call.h"

#include <cerrno>
#include <cstring>
#include <optional>

#include "client/interrupt.h"

namespace tpud::client {

void SetDeadline(grpc::ClientContext& context, std::chrono::duration<double> timeout) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
}

Result CallWithContext(const Session& session, grpc::ClientContext& context, CallBound bound,
                       const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  std::optional<CancelOnInterrupt> interrupt;
  if (bound == CallBound::kTimeout) {
    SetDeadline(context, session.timeout);
  } else {
    interrupt.emplace(&context);
  }
  return ResultFromStatus(call(&context), session.socket_path, session.timeout);
}

Result Print(const Session& session, std::string_view text) {
  session.out->write(text.data(), static_cast<std::streamsize>(text.size()));
  session.out->flush();
  if (*session.out) return Result::Ok();
  return {kExitError, std::string("cannot write output: ") + std::strerror(errno)};
}

}  // namespace tpud::client
