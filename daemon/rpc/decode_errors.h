// A request that does not parse as its message (bytes that are not protobuf,
// a string field that is not UTF-8) never reaches a handler: gRPC answers it
// itself, with INTERNAL (grpcpp/impl/codegen/proto_utils.h GenericDeserialize).
// This server interceptor turns that answer into INVALID_ARGUMENT, the code
// for a bad request, with a message naming the method.
//
// How it knows: for a request that failed to parse, the sync server still runs
// the POST_RECV_MESSAGE interception point, with a null message
// (src/cpp/server/server_cc.cc, SyncRequest::Run), and the status then sent
// passes PRE_SEND_STATUS, where it can be replaced.
//
// An undecodable request never reaches the admission (admission.h), so the
// caller is checked here too, with the same decision (`authorize`), at
// POST_RECV_INITIAL_METADATA: an unauthorized caller's answer is
// PERMISSION_DENIED whatever it sent (a peer the listener refused never gets
// this far; this holds for any that would).
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace tpud {

// OK when the caller behind a gRPC peer name may use tpud.
using Authorizer = std::function<absl::Status(const std::string& grpc_peer)>;

// For ServerBuilder::experimental().SetInterceptorCreators. `authorize` is
// called on gRPC's threads.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeDecodeErrorInterceptorFactory(
    Authorizer authorize);

}  // namespace tpud
