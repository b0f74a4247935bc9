// libFuzzer target: control requests as they arrive off the wire. The first
// byte picks the RPC; the rest is the serialized request. Decoding, the
// request limits and the spec checks must never crash, and a request the
// limits admit must stay within them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/config/config.h"
#include "daemon/rpc/request_limits.h"
#include "tpud/v1/tpud.pb.h"

namespace {

template <typename Request>
void Check(const std::string& bytes) {
  Request request;
  if (!request.ParseFromString(bytes)) return;  // gRPC answers these itself.
  (void)tpud::CheckRequest(request);
}

void CheckStart(const std::string& bytes) {
  tpud::v1::StartJobRequest request;
  if (!request.ParseFromString(bytes) || !tpud::CheckRequest(request).ok()) return;
  if (request.has_ad_hoc()) {
    tpud::JobSpec spec;
    spec.name = request.name();
    spec.command.assign(request.ad_hoc().command().begin(), request.ad_hoc().command().end());
    spec.working_dir = request.ad_hoc().working_dir();
    spec.env.insert(request.ad_hoc().env().begin(), request.ad_hoc().env().end());
    if (tpud::ValidateJobSpec(spec).ok()) (void)tpud::AdHocJobSpecYaml(spec);
  } else if (request.spec_case() == tpud::v1::StartJobRequest::kSpecYaml) {
    if (request.spec_yaml().size() > tpud::kMaxSpecYamlBytes) __builtin_trap();  // The limit held.
    (void)tpud::ParseJobSpec(request.spec_yaml(), "request", "/");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 8) {
    case 0: CheckStart(bytes); break;
    case 1: Check<tpud::v1::StopJobRequest>(bytes); break;
    case 2: Check<tpud::v1::RestartJobRequest>(bytes); break;
    case 3: Check<tpud::v1::GetJobRequest>(bytes); break;
    case 4: Check<tpud::v1::WatchEventsRequest>(bytes); break;
    case 5: Check<tpud::v1::TailLogsRequest>(bytes); break;
    case 6: Check<tpud::v1::RemoveJobRequest>(bytes); break;
    default: Check<tpud::v1::DoctorRequest>(bytes); break;
  }
  return 0;
}
