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
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace tpud {

// For ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeDecodeErrorInterceptorFactory();

}  // namespace tpud
