// Who may use the control socket, and what requests it refuses: the socket's
// mode and group, SO_PEERCRED checks with tpuctl run as `nobody`, and a
// bounded fuzz of malformed and oversized requests against a daemon with jobs.
#include <grp.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <random>

#include "tests/integration/adversity.h"
#include "tests/integration/harness.h"
#include "tests/integration/processes.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud::testing {
namespace {

using Catch::Matchers::Contains;
using json = nlohmann::json;

constexpr char kSleepers[] = R"(
- name: one
  command: [/bin/sleep, "1000"]
  autostart: true
  start_seconds: 0.2
- name: two
  command: [/bin/sleep, "1000"]
  autostart: true
  start_seconds: 0.2
)";

std::map<std::string, int> RunningPids(const TpudProcess& tpud) {
  std::map<std::string, int> pids;
  for (const char* job : {"one", "two"}) {
    const json status = tpud.WaitForState(job, "running");
    REQUIRE(status["state"] == "running");
    pids[job] = status["pid"].get<int>();
  }
  return pids;
}

void CheckUnharmed(const TpudProcess& tpud, const std::map<std::string, int>& pids) {
  for (const auto& [job, pid] : pids) {
    const json status = tpud.Status(job);
    INFO(job << ": " << status.dump());
    CHECK(status["state"] == "running");
    CHECK(status["pid"] == pid);
    CHECK(status["attempt"] == 1);
    CHECK_FALSE(ProcessGone(pid));
  }
  CHECK(tpud.Info()["pid"] == tpud.pid());
}

TEST_CASE("Access: the socket is 0660 and owned by socket_group, others cannot even connect",
          "[integration][access]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0755));
  TpudProcess tpud(dir, kSleepers, "socket_group: users");
  struct stat st {};
  REQUIRE(::stat(tpud.socket().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0660);
  CHECK(st.st_gid == ::getgrnam("users")->gr_gid);
  const CommandResult denied = TpuctlAsNobody(tpud, "", {"status"});
  // The permission message and exit code, not "cannot reach tpud ... is tpud running?".
  CHECK(denied.exit_code == 1);
  const std::string nobody_uid = std::to_string(::getpwnam("nobody")->pw_uid);
  CHECK(denied.err == "tpuctl: permission denied: uid " + nobody_uid + " is not root nor in group users\n");
  CHECK(TpuctlAsNobody(tpud, "users", {"status"}).exit_code == 0);
}

TEST_CASE("Access: a peer neither root nor in socket_group gets PERMISSION_DENIED, jobs untouched",
          "[integration][access]") {
  if (!CanRunAsNobody()) return;
  TempDir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0755));
  TpudProcess tpud(dir, kSleepers, "socket_group: users\nsocket_mode: \"0666\"");
  const std::map<std::string, int> pids = RunningPids(tpud);
  const std::string nobody_uid = std::to_string(::getpwnam("nobody")->pw_uid);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status"}, {"stop", "one"}, {"restart", "two"}, {"logs", "one"}}) {
    const CommandResult denied = TpuctlAsNobody(tpud, "", args);
    INFO(args[0] << ": " << denied.err);
    CHECK(denied.exit_code == 1);
    CHECK(denied.err == "tpuctl: permission denied: uid " + nobody_uid + " is not root nor in group users\n");
  }
  CheckUnharmed(tpud, pids);
  // A member of the group (supplementary, as SO_PEERGROUPS reports it) may.
  const CommandResult member = TpuctlAsNobody(tpud, "users", {"status", "one", "--json"});
  CHECK(member.exit_code == 0);
  CHECK_THAT(tpud.StderrText(), Contains("refused: permission denied: uid " + nobody_uid));
}

// --- fuzz -------------------------------------------------------------------

using Rng = std::mt19937_64;

std::string RandomBytes(Rng& rng, std::size_t max_size) {
  std::string out(std::uniform_int_distribution<std::size_t>(0, max_size)(rng), '\0');
  for (char& c : out) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
  return out;
}

// A name that can never be a job's: uppercase first, then random bytes.
std::string BadName(Rng& rng) { return "X" + RandomBytes(rng, 80); }

struct Outcome {
  std::string what;
  grpc::Status status;
  bool must_be_invalid;  // Else any of OK, NOT_FOUND, INVALID_ARGUMENT.
};


// Raw bytes to a unary method, bypassing protobuf.
grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& bytes) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  stub.UnaryCall(WithDeadline(&ctx), method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

Outcome FuzzOne(Rng& rng, v1::Supervisor::Stub& stub, const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  WithDeadline(&ctx);
  v1::StartJobRequest start;
  v1::StartJobResponse start_resp;
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0: {
      v1::StopJobRequest req;
      req.set_name(BadName(rng));
      v1::StopJobResponse resp;
      return {"StopJob(random bytes)", stub.StopJob(&ctx, req, &resp), true};
    }
    case 1: {
      v1::GetJobRequest req;  // Valid and unknown, or empty.
      req.set_name(std::uniform_int_distribution<int>(0, 1)(rng) ? ""
                                                                 : "no-such-" + std::to_string(rng() % 1000));
      v1::GetJobResponse resp;
      return {"GetJob(unknown)", stub.GetJob(&ctx, req, &resp), false};
    }
    case 2:
      start.set_name(std::uniform_int_distribution<int>(0, 1)(rng) ? "" : BadName(rng));  // Empty oneof.
      return {"StartJob(no spec)", stub.StartJob(&ctx, start, &start_resp), true};
    case 3:
      start.set_name("big-argv");
      start.mutable_ad_hoc()->add_command("/bin/echo");
      start.mutable_ad_hoc()->add_command(std::string(10 << 20, 'a'));
      return {"StartJob(10 MB argv)", stub.StartJob(&ctx, start, &start_resp), true};
    case 4:
      start.set_name("big-env");
      start.mutable_ad_hoc()->add_command("/bin/true");
      for (int i = 0; i < 100000; ++i)
        (*start.mutable_ad_hoc()->mutable_env())["V" + std::to_string(i)] = "x";
      return {"StartJob(100k env)", stub.StartJob(&ctx, start, &start_resp), true};
    case 5:
      start.set_spec_yaml(RandomBytes(rng, 4096));
      start.set_spec_source(RandomBytes(rng, 64));
      return {"StartJob(random spec_yaml)", stub.StartJob(&ctx, start, &start_resp), true};
    case 6: {
      static const char* kMethods[] = {"StartJob", "StopJob",  "RestartJob",
                                       "GetJob",   "ListJobs", "GetDaemonInfo"};
      const std::string method = std::string("/tpud.v1.Supervisor/") + kMethods[rng() % 6];
      return {method + "(raw bytes)", RawCall(channel, method, RandomBytes(rng, 2048)), false};
    }
    case 7: {
      v1::WatchEventsRequest req;
      req.set_job(BadName(rng));
      req.set_history(static_cast<int>(rng()));
      auto reader = stub.WatchEvents(&ctx, req);
      v1::WatchEventsResponse resp;
      while (reader->Read(&resp)) {
      }
      return {"WatchEvents(random job)", reader->Finish(), true};
    }
    case 8: {
      v1::TailLogsRequest req;
      req.set_job(BadName(rng));
      req.set_lines(static_cast<int>(rng()));
      auto reader = stub.TailLogs(&ctx, req);
      v1::TailLogsResponse resp;
      while (reader->Read(&resp)) {
      }
      return {"TailLogs(random job)", reader->Finish(), true};
    }
    default:
      start.set_name(BadName(rng));
      for (int i = 0; i < 5; ++i) start.mutable_ad_hoc()->add_command(RandomBytes(rng, 100));
      start.mutable_ad_hoc()->set_working_dir(RandomBytes(rng, 100));
      return {"StartJob(random ad hoc)", stub.StartJob(&ctx, start, &start_resp), true};
  }
}

TEST_CASE("Access: 300 random, malformed and oversized requests leave the daemon and its jobs unharmed",
          "[integration][access]") {
  TempDir dir;
  TpudProcess tpud(dir, kSleepers);
  const std::map<std::string, int> pids = RunningPids(tpud);
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto channel =
      grpc::CreateCustomChannel("unix:" + tpud.socket().string(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Supervisor::NewStub(channel);
  const std::uint64_t seed = 20240517;
  Rng rng(seed);
  std::map<std::string, int> codes;
  for (int i = 0; i < 300; ++i) {
    const Outcome o = FuzzOne(rng, *stub, channel);
    const grpc::StatusCode code = o.status.error_code();
    codes[o.what + " -> " + std::to_string(code)]++;
    INFO("seed " << seed << " request " << i << ": " << o.what << " -> " << code << " "
                 << o.status.error_message());
    if (o.must_be_invalid) {
      REQUIRE(code == grpc::StatusCode::INVALID_ARGUMENT);
    } else {
      REQUIRE((code == grpc::StatusCode::OK || code == grpc::StatusCode::NOT_FOUND ||
               code == grpc::StatusCode::INVALID_ARGUMENT));
    }
  }
  // Beyond gRPC's own limit (16 MiB) gRPC refuses the message itself.
  grpc::ClientContext ctx;
  v1::StartJobRequest huge;
  huge.set_name("huge");
  huge.mutable_ad_hoc()->add_command(std::string(20 << 20, 'a'));
  v1::StartJobResponse resp;
  CHECK(stub->StartJob(WithDeadline(&ctx), huge, &resp).error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (const auto& [what, count] : codes) UNSCOPED_INFO(what << ": " << count);
  CheckUnharmed(tpud, pids);
  CHECK(tpud.Status("one")["state"] == "running");
  CHECK(tpud.Tpuctl({"status"}).exit_code == 0);
}

}  // namespace

TEST_CASE("Access: a job gets its spec's env and the allow-list, never tpud's own secrets",
          "[integration][access]") {
  TempDir dir;
  // tpud's own environment, as a unit's Environment= or a token in it would set it.
  ::setenv("GH_PAT", "ghp_secret_of_tpud", 1);
  ::setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8", 1);
  const std::string env_file = (dir / "job.env").string();
  TpudProcess tpud(dir, R"(
- name: printenv
  command: [/bin/sh, -c, 'env > )" + env_file + R"(']
  env: {FROM_SPEC: "yes"}
)");
  ::unsetenv("GH_PAT");
  ::unsetenv("TPU_ACCELERATOR_TYPE");
  REQUIRE(tpud.Tpuctl({"start", "printenv"}).exit_code == 0);
  REQUIRE(tpud.WaitForState("printenv", "succeeded")["state"] == "succeeded");
  const std::string env = ReadFile(env_file);
  CHECK_THAT(env, !Contains("ghp_secret_of_tpud"));
  CHECK_THAT(env, Contains("TPU_ACCELERATOR_TYPE=v5litepod-8"));
  CHECK_THAT(env, Contains("FROM_SPEC=yes"));
  CHECK_THAT(env, Contains("TPUD_JOB=printenv"));
  CHECK_THAT(env, Contains("PATH="));
}

}  // namespace tpud::testing
