// Stops and leaves kept on disk until etcd has them.
#include "daemon/slice/pending_proposals.h"

#include <catch2/catch.hpp>

#include "tests/support/temp_dir.h"

namespace tpud::slice {
namespace {

GangProposal Proposal(GangProposal::Intent intent, std::int64_t base, const std::string& reason) {
  GangProposal p;
  p.intent = intent;
  p.base_generation = base;
  p.worker = 1;
  p.reason = reason;
  p.restart.max_restarts = 7;
  return p;
}

TEST_CASE("Pending proposals: a stop and a leave outlive the tpud that made them until etcd has them", "[slice]") {
  testing::TempDir dir;
  const auto path = dir / "slice-proposals.json";
  {
    PendingProposals kept(path);
    REQUIRE(kept.Load().ok());
    REQUIRE(kept.Add("train", Proposal(GangProposal::Intent::kStop, 3, "stopped by tpuctl")).ok());
    REQUIRE(kept.Add("train", Proposal(GangProposal::Intent::kRestart, 3, "crash")).ok());  // Not kept.
    REQUIRE(kept.Add("eval", Proposal(GangProposal::Intent::kLeave, 4, "worker 1 left")).ok());
  }
  PendingProposals next(path);
  absl::StatusOr<std::vector<PendingProposal>> loaded = next.Load();
  REQUIRE(loaded.ok());
  REQUIRE(loaded->size() == 2);
  CHECK((*loaded)[0].job == "train");
  CHECK((*loaded)[0].proposal.intent == GangProposal::Intent::kStop);
  CHECK((*loaded)[0].proposal.base_generation == 3);
  CHECK((*loaded)[0].proposal.restart.max_restarts == 7);
  CHECK((*loaded)[1].proposal.intent == GangProposal::Intent::kLeave);
  REQUIRE(next.Remove("train", (*loaded)[0].proposal).ok());
  REQUIRE(next.Remove("eval", (*loaded)[1].proposal).ok());
  CHECK_FALSE(std::filesystem::exists(path));  // Nothing pending: no file.
}

TEST_CASE("Pending proposals: a damaged file is an error that names it", "[slice]") {
  testing::TempDir dir;
  dir.WriteFile("slice-proposals.json", "[{\"job\": ");
  PendingProposals kept(dir / "slice-proposals.json");
  absl::StatusOr<std::vector<PendingProposal>> loaded = kept.Load();
  REQUIRE_FALSE(loaded.ok());
  CHECK_THAT(std::string(loaded.status().message()), Catch::Matchers::Contains("slice-proposals.json"));
  CHECK(dir.Read("slice-proposals.json.damaged") == "[{\"job\": ");  // Kept for a person.
  GangProposal stop;
  stop.intent = GangProposal::Intent::kStop;
  REQUIRE(kept.Add("train", stop).ok());
  CHECK(dir.Read("slice-proposals.json.damaged") == "[{\"job\": ");
}

}  // namespace
}  // namespace tpud::slice
