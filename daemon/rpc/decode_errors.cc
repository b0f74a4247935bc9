#include "daemon/rpc/decode_errors.h"

#include <grpcpp/server_context.h>
#include <grpcpp/support/interceptor.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One per call.
class DecodeErrorInterceptor final : public grpc::experimental::Interceptor {
 public:
  DecodeErrorInterceptor(grpc::experimental::ServerRpcInfo* info, const Authorizer& authorize)
      : info_(info), method_(info->method() != nullptr ? info->method() : ""), authorize_(authorize) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      denied_ = authorize_(info_->server_context()->peer());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      undecodable_ = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      if (!denied_.ok()) {
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, std::string(denied_.message())));
      } else if (undecodable_ && methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL) {
        methods->ModifySendStatus(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                         absl::StrCat("request: not a valid ", method_,
                                      " request (malformed protobuf, or a string field that is not UTF-8)")));
      }
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  const std::string method_;
  const Authorizer& authorize_;
  absl::Status denied_;
  bool undecodable_ = false;
};

class DecodeErrorInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit DecodeErrorInterceptorFactory(Authorizer authorize) : authorize_(std::move(authorize)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new DecodeErrorInterceptor(info, authorize_);
  }

 private:
  const Authorizer authorize_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeDecodeErrorInterceptorFactory(
    Authorizer authorize) {
  return std::make_unique<DecodeErrorInterceptorFactory>(std::move(authorize));
}

}  // namespace tpud
