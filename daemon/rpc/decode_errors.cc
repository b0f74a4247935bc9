#include "daemon/rpc/decode_errors.h"

#include <grpcpp/support/interceptor.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One per call.
class DecodeErrorInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit DecodeErrorInterceptor(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      undecodable_ = true;
    }
    if (undecodable_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL) {
      methods->ModifySendStatus(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("request: not a valid ", method_,
                                    " request (malformed protobuf, or a string field that is not UTF-8)")));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool undecodable_ = false;
};

class DecodeErrorInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new DecodeErrorInterceptor(info->method() != nullptr ? info->method() : "");
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeDecodeErrorInterceptorFactory() {
  return std::make_unique<DecodeErrorInterceptorFactory>();
}

}  // namespace tpud
