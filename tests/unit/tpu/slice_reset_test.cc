// Resetting a multi-host slice through its queued resource
// (daemon/tpu/slice_reset.h), against the Cloud TPU API emulator.
#include "daemon/tpu/slice_reset.h"

#include <catch2/catch.hpp>

#include "tests/support/cloud_tpu_emulator.h"
#include "tests/support/gce_metadata_emulator.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;

struct Cloud {
  testing::MetadataEmulator metadata;
  testing::CloudTpuEmulator tpu{{"--queued-resource", "projects/p/locations/z/queuedResources/qr", "--op-delay", "0.2"}};

  TpuConfig Config(const std::string& queued_resource) const {
    TpuConfig config;
    config.project = "p";
    config.zone = "z";
    config.queued_resource = queued_resource;
    config.api_endpoint = tpu.endpoint();
    config.metadata_host = metadata.host();
    config.poll_interval_seconds = 0.05;
    config.timeout_seconds = 20;
    return config;
  }
  QueuedResourceReset Reset(const std::string& queued_resource) const {
    return QueuedResourceReset(Config(queued_resource), NewCurlHttpClient(),
                               std::make_shared<MetadataClient>(metadata.base_url()), SystemWaitClock());
  }
};

}  // namespace

TEST_CASE("Slice reset: queuedResources.reset, the operation awaited, the queued resource ACTIVE again",
          "[tpu][slice]") {
  Cloud cloud;
  QueuedResourceReset reset = cloud.Reset("qr");
  REQUIRE(reset.Reset().ok());
  const std::vector<std::string> requests = cloud.tpu.Requests();
  REQUIRE_FALSE(requests.empty());
  CHECK(requests.front() == "POST /v2/projects/p/locations/z/queuedResources/qr:reset 200");
  CHECK(requests.back() == "GET /v2/projects/p/locations/z/queuedResources/qr 200");
  // A full name is taken as it is.
  CHECK(cloud.Reset("projects/p/locations/z/queuedResources/qr").ResourceName(nullptr).value() ==
        "projects/p/locations/z/queuedResources/qr");
}

TEST_CASE("Slice reset: an unknown queued resource is an error naming it", "[tpu][slice]") {
  Cloud cloud;
  const absl::Status status = cloud.Reset("nope").Reset();
  CHECK(status.code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(status.message()), Contains("queued resource projects/p/locations/z/queuedResources/nope"));
  CHECK_FALSE(MakeSliceReset(TpuConfig{}));  // No queued resource: no slice-level reset.
}

}  // namespace tpud
