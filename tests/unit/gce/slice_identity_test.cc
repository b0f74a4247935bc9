// Who this worker is in its slice (daemon/gce/slice_identity.h): the config
// first, then the metadata server (emulated), then the environment.
#include "daemon/gce/slice_identity.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/support/gce_metadata_emulator.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;

GetEnv Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("Slice identity: explicit config wins over every other source", "[slice][gce]") {
  SliceConfig slice;
  slice.name = "pod";
  slice.worker_id = 3;
  slice.num_workers = 4;
  const absl::StatusOr<SliceIdentity> id =
      ResolveSliceIdentity(slice, "node", nullptr, Env({{"TPU_WORKER_ID", "1"}, {"TPU_NAME", "env"}}));
  REQUIRE(id.ok());
  CHECK(id->name == "pod");
  CHECK(id->worker_id == 3);
  CHECK(id->num_workers == 4);
  CHECK(id->source == "name: config, worker_id: config, num_workers: config");
}

TEST_CASE("Slice identity: auto reads the metadata server's worker number and endpoints", "[slice][gce]") {
  testing::MetadataEmulator emu({"--set", "instance/attributes/agent-worker-number=2", "--set",
                                 "instance/attributes/worker-network-endpoints=w0:0:10.0.0.2,w1:1:10.0.0.3,"
                                 "w2:2:10.0.0.4,w3:3:10.0.0.5"});
  MetadataClient metadata(emu.base_url());
  const absl::StatusOr<SliceIdentity> id =
      ResolveSliceIdentity(SliceConfig{}, "v4-32", &metadata, Env({{"TPU_WORKER_ID", "0"}}));
  REQUIRE(id.ok());
  CHECK(id->name == "v4-32");
  CHECK(id->worker_id == 2);
  CHECK(id->num_workers == 4);
  CHECK(id->source == "name: tpu.name, worker_id: metadata, num_workers: metadata");
}

TEST_CASE("Slice identity: the slice's name comes from the node's own instance name, never $TPU_NAME",
          "[slice][gce]") {
  testing::MetadataEmulator emu({"--set", "instance/name=t1v-n-1a2b3c4d-w-3", "--set",
                                 "instance/attributes/agent-worker-number=3", "--set",
                                 "instance/attributes/worker-network-endpoints=a:0:10.0.0.2,b:1:10.0.0.3,"
                                 "c:2:10.0.0.4,d:3:10.0.0.5"});
  MetadataClient metadata(emu.base_url());
  const absl::StatusOr<SliceIdentity> id =
      ResolveSliceIdentity(SliceConfig{}, "", &metadata, Env({{"TPU_NAME", "local"}}));
  REQUIRE(id.ok());
  CHECK(id->name == "t1v-n-1a2b3c4d");
  CHECK(id->source == "name: metadata, worker_id: metadata, num_workers: metadata");
  // Without a metadata server, $TPU_NAME ("local" on many VMs) names nothing.
  const absl::StatusOr<SliceIdentity> env_only = ResolveSliceIdentity(
      SliceConfig{}, "", nullptr, Env({{"TPU_NAME", "local"}, {"TPU_WORKER_ID", "1"}, {"TPU_WORKER_HOSTNAMES", "a,b"}}));
  CHECK(env_only.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(env_only.status().message()), Contains("set slice.name"));
}

TEST_CASE("Slice identity: without a metadata server the environment names the worker", "[slice][gce]") {
  SliceConfig named;
  named.name = "my-slice";
  const absl::StatusOr<SliceIdentity> id = ResolveSliceIdentity(
      named, "", nullptr, Env({{"TPU_WORKER_ID", "1"}, {"TPU_WORKER_HOSTNAMES", "h0,h1,h2"}}));
  REQUIRE(id.ok());
  CHECK(id->name == "my-slice");
  CHECK(id->worker_id == 1);
  CHECK(id->num_workers == 3);
}

TEST_CASE("Slice identity: what cannot be resolved is an error naming every source tried", "[slice][gce]") {
  absl::StatusOr<SliceIdentity> id = ResolveSliceIdentity(SliceConfig{}, "", nullptr, Env({}));
  CHECK(id.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(id.status().message()), Contains("tpu.name") && Contains("instance/name"));
  id = ResolveSliceIdentity(SliceConfig{}, "s", nullptr, Env({{"TPU_WORKER_HOSTNAMES", "a,b"}}));
  CHECK_THAT(std::string(id.status().message()), Contains("slice.worker_id is auto") && Contains("$TPU_WORKER_ID"));
  id = ResolveSliceIdentity(SliceConfig{}, "s", nullptr, Env({{"TPU_WORKER_ID", "x"}}));
  CHECK(id.status().code() == absl::StatusCode::kInvalidArgument);
  id = ResolveSliceIdentity(SliceConfig{}, "s", nullptr, Env({{"TPU_WORKER_ID", "2"}, {"TPU_WORKER_HOSTNAMES", "a,b"}}));
  CHECK_THAT(std::string(id.status().message()), Contains("worker id 2 is not below the slice's 2 workers"));
}

}  // namespace tpud
