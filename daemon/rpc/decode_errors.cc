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
  DecodeErrorInterceptor(grpc::experimental::ServerRpcInfo* info, const PeerRegistry* registry,
                         const AccessPolicy& policy)
      : info_(info), method_(info->method() != nullptr ? info->method() : ""), registry_(registry), policy_(policy) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA) &&
        registry_ != nullptr) {
      denied_ = AuthorizeCall(info_->server_context()->peer(), *registry_, policy_);
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
  const PeerRegistry* registry_;
  const AccessPolicy& policy_;
  absl::Status denied_;
  bool undecodable_ = false;
};

class DecodeErrorInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  DecodeErrorInterceptorFactory(const PeerRegistry* registry, const AccessPolicy& policy)
      : registry_(registry), policy_(policy) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new DecodeErrorInterceptor(info, registry_, policy_);
  }

 private:
  const PeerRegistry* registry_;
  const AccessPolicy& policy_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeDecodeErrorInterceptorFactory(
    const PeerRegistry* registry, const AccessPolicy& policy) {
  return std::make_unique<DecodeErrorInterceptorFactory>(registry, policy);
}

}  // namespace tpud
