#include "client/tpu_commands.h"

#include <cerrno>
#include <cstring>
#include <optional>

#include "client/format_tpu.h"
#include "client/interrupt.h"

namespace tpud::client {
namespace {

void SetDeadline(grpc::ClientContext& context, std::chrono::duration<double> timeout) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
}

Result Print(const Session& session, const std::string& text) {
  *session.out << text;
  session.out->flush();
  if (*session.out) return Result::Ok();
  return {kExitError, std::string("cannot write output: ") + std::strerror(errno)};
}

}  // namespace

Result ShowTpu(const Session& session, bool json) {
  grpc::ClientContext context;
  SetDeadline(context, session.timeout);
  tpud::v1::GetTpuResponse response;
  const grpc::Status status = session.stub->GetTpu(&context, {}, &response);
  if (!status.ok()) return ResultFromStatus(status, session.socket_path, session.timeout);
  return Print(session, json ? TpuJson(response) + "\n" : FormatTpu(response));
}

Result ResetTpu(const Session& session, const std::string& backend) {
  grpc::ClientContext context;
  CancelOnInterrupt interrupt(&context);
  tpud::v1::ResetTpuRequest request;
  request.set_backend(backend);
  tpud::v1::ResetTpuResponse response;
  const grpc::Status status = session.stub->ResetTpu(&context, request, &response);
  if (!status.ok()) return ResultFromStatus(status, session.socket_path, session.timeout);
  const std::string line = FormatTpuReset(response.reset());
  if (response.reset().attempted() && response.reset().result() != "ok") return {kExitError, line};
  return Print(session, line + "\n");
}

Result RunDoctor(const Session& session, const std::string& job) {
  grpc::ClientContext context;
  SetDeadline(context, session.timeout);
  tpud::v1::DoctorRequest request;
  request.set_job(job);
  tpud::v1::DoctorResponse response;
  const grpc::Status status = session.stub->Doctor(&context, request, &response);
  if (!status.ok()) return ResultFromStatus(status, session.socket_path, session.timeout);
  if (Result printed = Print(session, FormatDoctor(response)); !printed.ok()) return printed;
  const int failed = FailedChecks(response);
  if (failed == 0) return Result::Ok();
  return {kExitError, std::to_string(failed) + (failed == 1 ? " check failed" : " checks failed")};
}

}  // namespace tpud::client
