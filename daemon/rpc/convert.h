// Between the core's types and tpud.v1 protos, and absl::Status -> grpc::Status.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "daemon/supervisor/job.h"
#include "daemon/supervisor/supervisor.h"
#include "tpud/v1/tpud.pb.h"

namespace tpud {

v1::JobState ToProto(JobState state);
void ToProto(const JobSnapshot& snapshot, v1::JobStatus* out);
void ToProto(const JobEvent& event, v1::JobEvent* out);
void ToProto(const ExitStatus& status, v1::ExitInfo* out);
void ToProto(const std::optional<CheckpointRef>& checkpoint, v1::Checkpoint* out);
void ToProto(const Classification& failure, v1::Failure* out);
void ToProto(const Incident& incident, v1::Incident* out);

// A state change or an incident, as one item of the events stream.
void ToProto(const NumberedEvent& event, v1::WatchEventsResponse* out);

// Same code, same message. The only place absl codes become gRPC codes.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tpud
