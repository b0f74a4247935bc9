#include "daemon/checkpoint/checkpoint.h"
#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace tpud {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr char kCommittedMetadata[] = R"({"init_timestamp_nsecs": 1, "commit_timestamp_nsecs": 1700000000000000000})";
constexpr char kUncommittedMetadata[] = R"({"init_timestamp_nsecs": 1700000000000000000})";

CheckpointSpec Spec(const fs::path& dir, CheckpointLayout layout, std::string pattern = "") {
  return CheckpointSpec{dir, layout, std::move(pattern)};
}

// Runs the scan, which must succeed, and returns what it found.
std::optional<CheckpointRef> Find(const CheckpointSpec& spec) {
  absl::StatusOr<std::optional<CheckpointRef>> found = FindNewestCheckpoint(spec);
  INFO(found.status().ToString());
  REQUIRE(found.ok());
  return *found;
}

void RequireFound(const std::optional<CheckpointRef>& found, const fs::path& path, std::int64_t step) {
  REQUIRE(found.has_value());
  CHECK(found->step == step);
  CHECK(found->path == path);
  CHECK(found->path.is_absolute());
}

void MakeTensorflowState(const TempDir& tmp, const std::string& latest, const std::vector<std::string>& all) {
  std::string state = "model_checkpoint_path: \"" + latest + "\"\n";
  for (const std::string& prefix : all) state += "all_model_checkpoint_paths: \"" + prefix + "\"\n";
  tmp.File("checkpoint", state);
}

void MakeTensorflowPrefix(const TempDir& tmp, const std::string& prefix, bool with_index) {
  tmp.File(prefix + ".data-00000-of-00001", "data");
  if (with_index) tmp.File(prefix + ".index", "index");
}

// ---- orbax ------------------------------------------------------------------

TEST_CASE("Checkpoint: orbax picks the highest committed step directory", "[checkpoint]") {
  TempDir tmp;
  tmp.File("100/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.Dir("200/default");  // Older orbax: no metadata file, the rename is the commit.
  tmp.Dir("not-a-step");
  tmp.File("300", "a file, not a step directory");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kOrbax)), tmp.path() / "200", 200);
}

TEST_CASE("Checkpoint: orbax tmp directory never counts", "[checkpoint]") {
  TempDir tmp;
  tmp.File("100/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("200.orbax-checkpoint-tmp-1700000000/_CHECKPOINT_METADATA", kCommittedMetadata);
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kOrbax)), tmp.path() / "100", 100);
}

TEST_CASE("Checkpoint: orbax metadata without commit_timestamp_nsecs is partial", "[checkpoint]") {
  TempDir tmp;
  tmp.File("100/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("200/_CHECKPOINT_METADATA", kUncommittedMetadata);
  tmp.File("300/_CHECKPOINT_METADATA", R"({"commit_timestamp_nsecs": null})");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kOrbax)), tmp.path() / "100", 100);
}

TEST_CASE("Checkpoint: orbax commit_success.txt marks a complete step", "[checkpoint]") {
  TempDir tmp;
  tmp.File("100/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("200/_CHECKPOINT_METADATA", kUncommittedMetadata);
  tmp.File("200/commit_success.txt", "Checkpoint commit was successful");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kOrbax)), tmp.path() / "200", 200);
}

TEST_CASE("Checkpoint: orbax ignores a step directory holding an unfinished torch DCP save", "[checkpoint]") {
  TempDir tmp;
  tmp.Dir("100");
  tmp.File("200/__0_0.distcp", "shard");
  tmp.File("300/.metadata.tmp", "metadata");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kOrbax)), tmp.path() / "100", 100);
}

// ---- huggingface ------------------------------------------------------------

TEST_CASE("Checkpoint: huggingface checkpoint-N needs trainer_state.json", "[checkpoint]") {
  TempDir tmp;
  tmp.File("checkpoint-500/trainer_state.json", "{}");
  tmp.File("checkpoint-1000/model.safetensors", "weights");  // Still being written.
  tmp.File("runs/trainer_state.json", "{}");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kHuggingface)), tmp.path() / "checkpoint-500", 500);
}

// ---- torch_dcp --------------------------------------------------------------

TEST_CASE("Checkpoint: torch DCP directory with .metadata.tmp is partial", "[checkpoint]") {
  TempDir tmp;
  tmp.File("step_100/.metadata", "m");
  tmp.File("step_200/.metadata", "m");
  tmp.File("step_200/.metadata.tmp", "m");  // A second save over it is in progress.
  tmp.File("step_300/.metadata.tmp", "m");
  tmp.File("step_400/__0_0.distcp", "shard");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kTorchDcp)), tmp.path() / "step_100", 100);
}

// ---- tensorflow -------------------------------------------------------------

TEST_CASE("Checkpoint: tensorflow prefix without .index never counts", "[checkpoint]") {
  TempDir tmp;
  MakeTensorflowState(tmp, "ckpt-3", {"ckpt-1", "ckpt-2", "ckpt-3"});
  MakeTensorflowPrefix(tmp, "ckpt-1", true);
  MakeTensorflowPrefix(tmp, "ckpt-2", true);
  MakeTensorflowPrefix(tmp, "ckpt-3", false);
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kTensorflow)), tmp.path() / "ckpt-2", 2);
}

TEST_CASE("Checkpoint: tensorflow takes the highest step, absolute paths included", "[checkpoint]") {
  TempDir tmp;
  MakeTensorflowPrefix(tmp, "model.ckpt-12", true);
  MakeTensorflowPrefix(tmp, "model.ckpt-9", true);
  MakeTensorflowState(tmp, "model.ckpt-9", {(tmp.path() / "model.ckpt-12").string(), "model.ckpt-9"});
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kTensorflow)), tmp.path() / "model.ckpt-12", 12);
}

TEST_CASE("Checkpoint: tensorflow _temp entries never count", "[checkpoint]") {
  TempDir tmp;
  MakeTensorflowPrefix(tmp, "ckpt-1", true);
  MakeTensorflowPrefix(tmp, "ckpt-5_temp", true);
  MakeTensorflowPrefix(tmp, "ckpt_temp_abc/part-7", true);
  MakeTensorflowState(tmp, "ckpt-5_temp", {"ckpt-1", "ckpt-5_temp", "ckpt_temp_abc/part-7"});
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kTensorflow)), tmp.path() / "ckpt-1", 1);
}

TEST_CASE("Checkpoint: tensorflow prefixes count only when the state file names them", "[checkpoint]") {
  TempDir tmp;
  MakeTensorflowPrefix(tmp, "ckpt-4", true);
  CHECK_FALSE(Find(Spec(tmp.path(), CheckpointLayout::kTensorflow)).has_value());
  MakeTensorflowState(tmp, "ckpt-4", {});
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kTensorflow)), tmp.path() / "ckpt-4", 4);
}

// ---- lightning --------------------------------------------------------------

TEST_CASE("Checkpoint: lightning takes the highest step=S file", "[checkpoint]") {
  TempDir tmp;
  tmp.File("epoch=0-step=100.ckpt", "c");
  tmp.File("epoch=1-step=200.ckpt", "c");
  tmp.File("epoch=2-step=300.ckpt.tmp", "c");
  tmp.File("last.ckpt", "c");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kLightning)), tmp.path() / "epoch=1-step=200.ckpt",
               200);
}

// ---- pattern ----------------------------------------------------------------

TEST_CASE("Checkpoint: pattern ignores a newer .tmp file", "[checkpoint]") {
  TempDir tmp;
  tmp.File("ckpt-10.pt", "c");
  tmp.File("ckpt-20.pt", "c");
  tmp.File("ckpt-30.pt.tmp", "c");
  tmp.File("notes.txt", "c");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kPattern, R"(ckpt-(\d+)\.pt$)")),
               tmp.path() / "ckpt-20.pt", 20);
  // Without the anchor the regex matches the .tmp file; the marker still excludes it.
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kPattern, R"(ckpt-(\d+)\.pt)")),
               tmp.path() / "ckpt-20.pt", 20);
}

TEST_CASE("Checkpoint: pattern skips every partial marker", "[checkpoint]") {
  TempDir tmp;
  tmp.Dir("100");
  for (const char* name : {"200.orbax-checkpoint-tmp-1", "300_temp", "400.partial", "500.tmp"}) tmp.Dir(name);
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kPattern, R"(^(\d+))")), tmp.path() / "100", 100);
}

TEST_CASE("Checkpoint: pattern steps compare as numbers, not names", "[checkpoint]") {
  TempDir tmp;
  tmp.File("ckpt-9.pt", "c");
  tmp.File("ckpt-10.pt", "c");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kPattern, R"(^ckpt-(\d+)\.pt$)")),
               tmp.path() / "ckpt-10.pt", 10);
}

TEST_CASE("Checkpoint: a bad pattern is InvalidArgument", "[checkpoint]") {
  TempDir tmp;
  for (const char* pattern : {R"(ckpt-(\d+)", R"(ckpt-\d+\.pt)", ""}) {
    INFO(pattern);
    absl::StatusOr<std::optional<CheckpointRef>> found =
        FindNewestCheckpoint(Spec(tmp.path(), CheckpointLayout::kPattern, pattern));
    CHECK(found.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

// ---- directory --------------------------------------------------------------

TEST_CASE("Checkpoint: a missing, empty or unset directory has no checkpoint", "[checkpoint]") {
  TempDir tmp;
  for (CheckpointLayout layout : {CheckpointLayout::kAuto, CheckpointLayout::kTensorflow, CheckpointLayout::kOrbax,
                                  CheckpointLayout::kHuggingface, CheckpointLayout::kTorchDcp,
                                  CheckpointLayout::kLightning}) {
    CHECK_FALSE(Find(Spec(tmp.path() / "not-yet", layout)).has_value());
    CHECK_FALSE(Find(Spec(tmp.path(), layout)).has_value());
    CHECK_FALSE(Find(Spec("", layout)).has_value());
  }
  CHECK_FALSE(Find(Spec(tmp.path() / "not-yet", CheckpointLayout::kPattern, R"(ckpt-(\d+))")).has_value());
}

TEST_CASE("Checkpoint: a directory that is a file is an error", "[checkpoint]") {
  TempDir tmp;
  fs::path file = tmp.File("plain-file", "x");
  absl::StatusOr<std::optional<CheckpointRef>> found = FindNewestCheckpoint(Spec(file, CheckpointLayout::kAuto));
  CHECK(found.status().code() == absl::StatusCode::kInternal);
  CHECK(found.status().message().find(file.string()) != std::string::npos);
}

TEST_CASE("Checkpoint: a relative directory yields an absolute path", "[checkpoint]") {
  TempDir tmp;
  tmp.File("checkpoint-7/trainer_state.json", "{}");
  fs::path relative = fs::relative(tmp.path(), fs::current_path());
  REQUIRE(relative.is_relative());
  RequireFound(Find(Spec(relative / "", CheckpointLayout::kHuggingface)), tmp.path() / "checkpoint-7", 7);
}

// ---- auto -------------------------------------------------------------------

TEST_CASE("Checkpoint: auto picks the newest step across layouts", "[checkpoint]") {
  TempDir tmp;
  MakeTensorflowPrefix(tmp, "ckpt-5", true);
  MakeTensorflowState(tmp, "ckpt-5", {"ckpt-5"});
  tmp.File("7/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("checkpoint-9/trainer_state.json", "{}");
  tmp.File("step_8/.metadata", "m");
  tmp.File("epoch=0-step=6.ckpt", "c");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kAuto)), tmp.path() / "checkpoint-9", 9);

  tmp.File("epoch=3-step=11.ckpt", "c");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kAuto)), tmp.path() / "epoch=3-step=11.ckpt", 11);
}

TEST_CASE("Checkpoint: auto never picks a partial checkpoint with a higher step", "[checkpoint]") {
  TempDir tmp;
  tmp.File("checkpoint-9/trainer_state.json", "{}");
  tmp.Dir("50.orbax-checkpoint-tmp-1");
  tmp.File("40/_CHECKPOINT_METADATA", kUncommittedMetadata);
  tmp.Dir("checkpoint-30");
  tmp.File("step_20/.metadata.tmp", "m");
  tmp.File("epoch=0-step=60.ckpt.tmp", "c");
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kAuto)), tmp.path() / "checkpoint-9", 9);
}

}  // namespace
// ---- every complete step (gangs resume from a step all workers hold) ---------

TEST_CASE("Checkpoint: every complete step is listed ascending, partial ones never", "[checkpoint]") {
  TempDir tmp;
  tmp.File("100/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("300/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("200/_CHECKPOINT_METADATA", kCommittedMetadata);
  tmp.File("400/_CHECKPOINT_METADATA", kUncommittedMetadata);  // Still being written.
  tmp.Dir("500.orbax-checkpoint-tmp-1700000000");
  absl::StatusOr<std::vector<std::int64_t>> steps = ListCompleteSteps(Spec(tmp.path(), CheckpointLayout::kOrbax));
  REQUIRE(steps.ok());
  CHECK(*steps == std::vector<std::int64_t>{100, 200, 300});
  // FindNewestCheckpoint agrees with the list's last entry.
  RequireFound(Find(Spec(tmp.path(), CheckpointLayout::kOrbax)), tmp.path() / "300", 300);
}

TEST_CASE("Checkpoint: the checkpoint of one step, not only the newest", "[checkpoint]") {
  TempDir tmp;
  tmp.Dir("checkpoint-10");
  tmp.File("checkpoint-10/trainer_state.json", "{}");
  tmp.Dir("checkpoint-20");
  tmp.File("checkpoint-20/trainer_state.json", "{}");
  tmp.Dir("checkpoint-30");  // No trainer_state.json: partial.
  const CheckpointSpec spec = Spec(tmp.path(), CheckpointLayout::kAuto);
  absl::StatusOr<std::optional<CheckpointRef>> at10 = FindCheckpointAtStep(spec, 10);
  REQUIRE(at10.ok());
  RequireFound(*at10, tmp.path() / "checkpoint-10", 10);
  absl::StatusOr<std::optional<CheckpointRef>> at30 = FindCheckpointAtStep(spec, 30);
  REQUIRE(at30.ok());
  CHECK_FALSE(at30->has_value());
  // No directory yet: nothing, not an error; a bad pattern: an error naming it.
  absl::StatusOr<std::vector<std::int64_t>> none = ListCompleteSteps(Spec(tmp.path() / "missing", CheckpointLayout::kAuto));
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(ListCompleteSteps(Spec(tmp.path(), CheckpointLayout::kPattern, "no-group")).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace tpud
