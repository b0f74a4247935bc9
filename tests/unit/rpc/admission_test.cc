// The one way into the control API (daemon/rpc/admission.h): every RPC of
// tpud.proto is served, and every one admits the call before its handler
// runs. The handlers here would block forever (their event loop never runs),
// so an answer at all proves the admission decided it.
#include "daemon/rpc/admission.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <future>

#include "tests/support/fake_clock.h"
#include "tests/support/fake_launcher.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;

const google::protobuf::ServiceDescriptor* SupervisorDescriptor() {
  return v1::StartJobRequest::descriptor()->file()->FindServiceByName("Supervisor");
}

std::vector<ServedMethod> AllMethods() {
  std::vector<ServedMethod> served;
  const google::protobuf::ServiceDescriptor* service = SupervisorDescriptor();
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    served.push_back({m->name(), m->input_type()->full_name(), m->output_type()->full_name()});
  }
  return served;
}

TEST_CASE("Admission: the table covers every RPC of tpud.proto, with its types", "[rpc][admission]") {
  testing::TempDir dir;
  boost::asio::io_context io;
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  Supervisor supervisor{clock, launcher, {dir.path() / "logs", dir.path() / "state"}};
  SupervisorService handlers{io, supervisor, DaemonInfo{}};
  AdmittedService admitted(handlers, nullptr, AccessPolicy{});
  CHECK(admitted.Coverage().ok());
  CHECK(admitted.methods().size() == static_cast<std::size_t>(SupervisorDescriptor()->method_count()));
}

TEST_CASE("Admission: an RPC without a handler, or a handler with other types, is named", "[rpc][admission]") {
  REQUIRE(CheckServiceCoverage(SupervisorDescriptor(), AllMethods()).ok());
  SECTION("a missing row") {
    std::vector<ServedMethod> served = AllMethods();
    served.erase(served.begin());
    const absl::Status status = CheckServiceCoverage(SupervisorDescriptor(), served);
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(status.message() == "rpc tpud.v1.Supervisor.StartJob has no handler");
  }
  SECTION("a row the proto does not have, and one twice") {
    std::vector<ServedMethod> served = AllMethods();
    served.push_back({"Frobnicate", "tpud.v1.StopJobRequest", "tpud.v1.StopJobResponse"});
    served.push_back(served.front());
    const absl::Status status = CheckServiceCoverage(SupervisorDescriptor(), served);
    CHECK_THAT(std::string(status.message()),
               Contains("rpc tpud.v1.Supervisor.Frobnicate is served but not in the proto") &&
                   Contains("rpc StartJob has two handlers"));
  }
  SECTION("a handler for other message types") {
    std::vector<ServedMethod> served = AllMethods();
    served.front().request_type = "tpud.v1.StopJobRequest";
    CHECK(CheckServiceCoverage(SupervisorDescriptor(), served).message() ==
          "rpc tpud.v1.Supervisor.StartJob takes tpud.v1.StartJobRequest and returns tpud.v1.StartJobResponse; "
          "its handler takes tpud.v1.StopJobRequest and returns tpud.v1.StartJobResponse");
  }
  SECTION("no service at all") { CHECK_FALSE(CheckServiceCoverage(nullptr, {}).ok()); }
}

// An in-process server whose handlers can never run (their loop is never
// run): only the admission can answer.
struct Rig {
  testing::TempDir dir;
  boost::asio::io_context io;  // Never run.
  testing::FakeClock clock;
  testing::FakeLauncher launcher;
  Supervisor supervisor{clock, launcher, {dir.path() / "logs", dir.path() / "state"}};
  SupervisorService handlers{io, supervisor, DaemonInfo{}};
  PeerRegistry registry;  // Empty: no caller is known, so none is admitted.
  AdmittedService admitted;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;

  explicit Rig(bool check_callers) : admitted(handlers, check_callers ? &registry : nullptr, AccessPolicy{}) {
    const std::string address = "unix:" + (dir.path() / "sock").string();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&admitted);
    server = builder.BuildAndStart();
    REQUIRE(server);
    channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  }
  ~Rig() { server->Shutdown(std::chrono::system_clock::now()); }

  // An empty request (a valid protobuf) to `method`, as raw bytes.
  grpc::Status Call(const std::string& method) {
    grpc::GenericStub stub(channel);
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }
};

TEST_CASE("Admission: every RPC refuses an unknown caller before its handler runs", "[rpc][admission]") {
  Rig rig(/*check_callers=*/true);
  const google::protobuf::ServiceDescriptor* service = SupervisorDescriptor();
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = "/" + service->full_name() + "/" + service->method(i)->name();
    const grpc::Status status = rig.Call(method);
    INFO(method << ": " << status.error_code() << " " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_THAT(status.error_message(), Contains("peer credentials unknown"));
  }
}

TEST_CASE("Admission: a request out of bounds is refused before its handler runs", "[rpc][admission]") {
  Rig rig(/*check_callers=*/false);
  for (const char* method : {"StopJob", "RestartJob", "RemoveJob", "GetJob", "TailLogs"}) {
    const grpc::Status status = rig.Call(std::string("/tpud.v1.Supervisor/") + method);
    INFO(method << ": " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Contains("required"));
  }
}

}  // namespace
}  // namespace tpud
