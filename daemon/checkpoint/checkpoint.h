// Finding the newest *complete* checkpoint of a job, per framework layout.
//
// Layouts and their completeness markers (sources: tensorflow checkpoint_management.py, orbax _src/path/atomicity.py,
// transformers trainer_utils.py, torch distributed/checkpoint/filesystem.py,
// lightning fabric/utilities/cloud_io.py):
//   tensorflow  `checkpoint` state file names model_checkpoint_path (and the
//               all_model_checkpoint_paths); complete = `<prefix>.index` exists.
//               Step = trailing -N of the prefix. `*_temp*` entries never count.
//   orbax       `<dir>/<step>/` directories; a name containing
//               `.orbax-checkpoint-tmp` is partial. When `_CHECKPOINT_METADATA`
//               exists it must carry `commit_timestamp_nsecs`; `commit_success.txt`
//               also marks a complete one.
//   huggingface `checkpoint-N/` directories holding `trainer_state.json` (written last).
//   torch_dcp   directories holding `.metadata` and no `.metadata.tmp`; the step is
//               the trailing number of the directory name.
//   lightning   `*step=S*.ckpt` files (saved atomically).
//   pattern     entries whose name matches the RE2 `pattern`; group 1 is the step.
//               Names containing `tmp`/`temp`/`partial` markers (.tmp, .partial,
//               .orbax-checkpoint-tmp, _temp) never count.
//   auto        tries tensorflow, orbax, huggingface, torch_dcp, lightning in turn
//               and takes the newest step any of them finds.
// tpud only reads checkpoint directories; it never deletes or writes them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/job_spec.h"

namespace tpud {

struct CheckpointRef {
  std::filesystem::path path;  // The checkpoint (file, directory or TF prefix), absolute.
  std::int64_t step = -1;
};

// Returns the complete checkpoint with the highest step, or nullopt when there
// is none (also when `spec.dir` is empty or does not exist yet: a job that has
// not saved is normal). Errors: InvalidArgument for a bad `pattern`,
// Internal/PermissionDenied when the directory cannot be read.
// Thread-safety: a pure function of the filesystem; safe from any thread.
absl::StatusOr<std::optional<CheckpointRef>> FindNewestCheckpoint(const CheckpointSpec& spec);

// The steps of every complete checkpoint, ascending (what a gang worker
// reports, so the gang can resume from a step every worker holds). Same
// completeness rules and errors as FindNewestCheckpoint; empty when none.
absl::StatusOr<std::vector<std::int64_t>> ListCompleteSteps(const CheckpointSpec& spec);

// The complete checkpoint of exactly `step`, or nullopt when there is none.
// Same rules and errors as FindNewestCheckpoint.
absl::StatusOr<std::optional<CheckpointRef>> FindCheckpointAtStep(const CheckpointSpec& spec, std::int64_t step);

}  // namespace tpud
