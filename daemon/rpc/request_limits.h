// Limits on control requests, checked before a request reaches the event loop
// (guarded_service.h). Each check returns InvalidArgument naming the field,
// e.g. "ad_hoc.command: 10485760 bytes in total, more than the limit of
// 1048576"; the daemon and its jobs are untouched by a rejected request.
//
// The job spec rules themselves (name syntax, NUL bytes, env names, execve
// sizes: config/limits.h) are checked again by ValidateJobSpec once a spec is
// built; these checks bound what tpud copies and parses before that.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "daemon/core/job_spec.h"
#include "tpud/v1/tpud.pb.h"

namespace tpud {

// gRPC's own receive limit (ServerBuilder::SetMaxReceiveMessageSize). A
// larger message is refused by gRPC itself with RESOURCE_EXHAUSTED before tpud
// sees it; it is above kMaxRequestBytes so that sizes in between get
// INVALID_ARGUMENT with tpud's reason.
inline constexpr std::size_t kMaxTransportMessageBytes = 16 << 20;
// Any request, serialized.
inline constexpr std::size_t kMaxRequestBytes = 4 << 20;
// StartJobRequest.spec_yaml.
inline constexpr std::size_t kMaxSpecYamlBytes = 256 << 10;

// Job names: CheckJobName in daemon/core/job_spec.h (the one rule).

// Per request type: size, names, and (StartJob) the spec's counts and sizes.
absl::Status CheckRequest(const v1::StartJobRequest& req);
absl::Status CheckRequest(const v1::StopJobRequest& req);
absl::Status CheckRequest(const v1::RestartJobRequest& req);
absl::Status CheckRequest(const v1::GetJobRequest& req);
absl::Status CheckRequest(const v1::ListJobsRequest& req);
absl::Status CheckRequest(const v1::WatchEventsRequest& req);
absl::Status CheckRequest(const v1::TailLogsRequest& req);
absl::Status CheckRequest(const v1::GetDaemonInfoRequest& req);
absl::Status CheckRequest(const v1::GetTpuRequest& req);
absl::Status CheckRequest(const v1::ResetTpuRequest& req);  // backend: at most 32 bytes.
absl::Status CheckRequest(const v1::DoctorRequest& req);    // job: empty or a job name.
absl::Status CheckRequest(const v1::RemoveJobRequest& req);
absl::Status CheckRequest(const v1::GetSliceRequest& req);
absl::Status CheckRequest(const v1::GetIncidentRequest& req);

}  // namespace tpud
