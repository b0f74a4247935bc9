// Layout rules, with their sources: see checkpoint.h.
//
// The scan lists the checkpoint directory once and hands the entries to each
// layout. Entries may vanish (a trainer pruning old checkpoints) or appear
// while we look: every filesystem call uses the error_code overloads, and an
// entry that cannot be inspected simply does not count.
#include "daemon/checkpoint/checkpoint.h"

#include <re2/re2.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;

// Every complete checkpoint found, by step; on a tie the one found first.
using Found = std::map<std::int64_t, fs::path>;

// Files we read (TF state file, orbax metadata) are small; cap what we load.
constexpr std::size_t kMaxSmallFileBytes = 1 << 20;

// Name fragments of checkpoints still being written, across frameworks.
constexpr std::string_view kPartialMarkers[] = {".tmp", ".partial", ".orbax-checkpoint-tmp", "_temp"};

struct Entry {
  std::string name;
  fs::path path;  // Absolute.
  bool is_dir = false;
  bool is_file = false;
};

bool HasPartialMarker(std::string_view name) {
  for (std::string_view marker : kPartialMarkers) {
    if (name.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

bool Exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::optional<std::int64_t> ParseStep(std::string_view digits) {
  std::int64_t step = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

// Group 1 of `re` (partially matched against `text`) as a step.
std::optional<std::int64_t> StepFromMatch(std::string_view text, const RE2& re) {
  std::string digits;
  if (!RE2::PartialMatch(text, re, &digits)) return std::nullopt;
  return ParseStep(digits);
}

// Records a complete checkpoint; on a tie the one recorded first stays.
void Keep(Found& found, fs::path path, std::int64_t step) { found.emplace(step, std::move(path)); }

// Reads a small file whole; nullopt when it is missing or unreadable.
std::optional<std::string> ReadSmallFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  text.resize(kMaxSmallFileBytes);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return std::nullopt;
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

absl::Status ListError(const fs::path& dir, const std::error_code& ec) {
  std::string message = absl::StrCat("checkpoint dir \"", dir.string(), "\": list: ", ec.message());
  if (ec == std::errc::permission_denied) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

Entry MakeEntry(const fs::directory_entry& dir_entry) {
  std::error_code ec;
  Entry entry;
  entry.path = dir_entry.path();
  entry.name = entry.path.filename().string();
  entry.is_dir = dir_entry.is_directory(ec);
  entry.is_file = !entry.is_dir && dir_entry.is_regular_file(ec);
  return entry;
}

// Lists `dir`. nullopt when it does not exist (the job has not saved yet).
absl::StatusOr<std::optional<std::vector<Entry>>> ListEntries(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return std::nullopt;
  if (ec) return ListError(dir, ec);
  std::vector<Entry> entries;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    entries.push_back(MakeEntry(*it));
  }
  // An entry vanishing mid-scan does not fail the increment; anything else does.
  if (ec) return ListError(dir, ec);
  return entries;
}

// ---- tensorflow -------------------------------------------------------------

// The prefixes a TF `checkpoint` state file names. Quoted values holding
// escapes are skipped: TF writes plain paths in practice.
std::vector<std::string> TensorflowPrefixes(const std::string& state) {
  static const RE2 kLine(
      R"re((?m)^\s*(?:model_checkpoint_path|all_model_checkpoint_paths)\s*:\s*"([^"\\]*)"\s*$)re");
  std::vector<std::string> prefixes;
  re2::StringPiece input(state);
  std::string prefix;
  while (RE2::FindAndConsume(&input, kLine, &prefix)) prefixes.push_back(prefix);
  return prefixes;
}

Found FindTensorflow(const fs::path& root) {
  static const RE2 kStep(R"(-(\d+)$)");
  std::optional<std::string> state = ReadSmallFile(root / "checkpoint");
  if (!state) return {};
  Found best;
  for (const std::string& text : TensorflowPrefixes(*state)) {
    fs::path prefix = (root / text).lexically_normal();  // `/` keeps an absolute `text` as is.
    std::string name = prefix.filename().string();
    if (name.empty() || HasPartialMarker(name) || HasPartialMarker(prefix.parent_path().filename().string())) {
      continue;
    }
    std::optional<std::int64_t> step = StepFromMatch(name, kStep);
    if (!step || !Exists(fs::path(prefix) += ".index")) continue;
    Keep(best, std::move(prefix), *step);
  }
  return best;
}

// ---- orbax ------------------------------------------------------------------

bool OrbaxMetadataCommitted(const fs::path& step_dir) {
  static const RE2 kCommitted(R"re("commit_timestamp_nsecs"\s*:\s*\d)re");
  std::optional<std::string> metadata = ReadSmallFile(step_dir / "_CHECKPOINT_METADATA");
  return metadata && RE2::PartialMatch(*metadata, kCommitted);
}

// A torch DCP save in progress (shards written, `.metadata` not yet renamed
// into place) would otherwise look like a finished orbax `<step>/` directory
// under `auto`.
bool LooksLikeUnfinishedDcp(const fs::path& step_dir) {
  if (Exists(step_dir / ".metadata.tmp")) return true;
  if (Exists(step_dir / ".metadata")) return false;
  std::error_code ec;
  for (fs::directory_iterator it(step_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".distcp") return true;
  }
  return false;
}

bool OrbaxStepComplete(const fs::path& step_dir) {
  if (Exists(step_dir / "commit_success.txt")) return true;
  if (Exists(step_dir / "_CHECKPOINT_METADATA")) return OrbaxMetadataCommitted(step_dir);
  return !LooksLikeUnfinishedDcp(step_dir);
}

Found FindOrbax(const std::vector<Entry>& entries) {
  static const RE2 kStepDir(R"(^(\d+)$)");
  Found best;
  for (const Entry& entry : entries) {
    if (!entry.is_dir || HasPartialMarker(entry.name)) continue;
    std::optional<std::int64_t> step = StepFromMatch(entry.name, kStepDir);
    if (step && OrbaxStepComplete(entry.path)) Keep(best, entry.path, *step);
  }
  return best;
}

// ---- huggingface ------------------------------------------------------------

Found FindHuggingface(const std::vector<Entry>& entries) {
  static const RE2 kStepDir(R"(^checkpoint-(\d+)$)");
  Found best;
  for (const Entry& entry : entries) {
    if (!entry.is_dir) continue;
    std::optional<std::int64_t> step = StepFromMatch(entry.name, kStepDir);
    if (step && Exists(entry.path / "trainer_state.json")) Keep(best, entry.path, *step);
  }
  return best;
}

// ---- torch_dcp --------------------------------------------------------------

Found FindTorchDcp(const std::vector<Entry>& entries) {
  static const RE2 kTrailingStep(R"((\d+)$)");
  Found best;
  for (const Entry& entry : entries) {
    if (!entry.is_dir || HasPartialMarker(entry.name)) continue;
    std::optional<std::int64_t> step = StepFromMatch(entry.name, kTrailingStep);
    if (!step || !Exists(entry.path / ".metadata") || Exists(entry.path / ".metadata.tmp")) continue;
    Keep(best, entry.path, *step);
  }
  return best;
}

// ---- lightning --------------------------------------------------------------

Found FindLightning(const std::vector<Entry>& entries) {
  static const RE2 kStepFile(R"(step=(\d+).*\.ckpt$)");
  Found best;
  for (const Entry& entry : entries) {
    if (!entry.is_file || HasPartialMarker(entry.name)) continue;
    std::optional<std::int64_t> step = StepFromMatch(entry.name, kStepFile);
    if (step) Keep(best, entry.path, *step);
  }
  return best;
}

// ---- pattern ----------------------------------------------------------------

absl::Status CheckPattern(const RE2& re, const std::string& pattern) {
  if (!re.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint.pattern \"", pattern, "\": ", re.error()));
  }
  if (re.NumberOfCapturingGroups() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.pattern \"", pattern, "\": needs a capturing group for the step"));
  }
  return absl::OkStatus();
}

Found FindByPattern(const std::vector<Entry>& entries, const RE2& re) {
  Found best;
  for (const Entry& entry : entries) {
    if (HasPartialMarker(entry.name)) continue;
    std::optional<std::int64_t> step = StepFromMatch(entry.name, re);
    if (step) Keep(best, entry.path, *step);
  }
  return best;
}

// ---- dispatch ---------------------------------------------------------------

Found FindForLayout(CheckpointLayout layout, const fs::path& root, const std::vector<Entry>& entries) {
  switch (layout) {
    case CheckpointLayout::kTensorflow: return FindTensorflow(root);
    case CheckpointLayout::kOrbax: return FindOrbax(entries);
    case CheckpointLayout::kHuggingface: return FindHuggingface(entries);
    case CheckpointLayout::kTorchDcp: return FindTorchDcp(entries);
    case CheckpointLayout::kLightning: return FindLightning(entries);
    case CheckpointLayout::kAuto:
    case CheckpointLayout::kPattern: break;  // Handled by the caller.
  }
  return {};
}

Found FindAuto(const fs::path& root, const std::vector<Entry>& entries) {
  constexpr CheckpointLayout kOrder[] = {CheckpointLayout::kTensorflow, CheckpointLayout::kOrbax,
                                         CheckpointLayout::kHuggingface, CheckpointLayout::kTorchDcp,
                                         CheckpointLayout::kLightning};
  Found best;
  for (CheckpointLayout layout : kOrder) best.merge(FindForLayout(layout, root, entries));  // Earlier layouts win ties.
  return best;
}

fs::path AbsoluteDir(const fs::path& dir) {
  std::error_code ec;
  fs::path root = fs::absolute(dir, ec);
  if (ec) root = dir;
  root = root.lexically_normal();
  if (!root.has_filename() && root.has_relative_path()) root = root.parent_path();  // Drop a trailing '/'.
  return root;
}

// Every complete checkpoint of `spec`, by step.
absl::StatusOr<Found> ListCheckpoints(const CheckpointSpec& spec) {
  std::optional<RE2> pattern;
  if (spec.layout == CheckpointLayout::kPattern) {
    pattern.emplace(spec.pattern, RE2::Quiet);
    if (absl::Status status = CheckPattern(*pattern, spec.pattern); !status.ok()) return status;
  }
  if (spec.dir.empty()) return Found{};
  fs::path root = AbsoluteDir(spec.dir);
  absl::StatusOr<std::optional<std::vector<Entry>>> entries = ListEntries(root);
  if (!entries.ok()) return entries.status();
  if (!entries->has_value()) return Found{};
  const std::vector<Entry>& listed = **entries;
  switch (spec.layout) {
    case CheckpointLayout::kAuto: return FindAuto(root, listed);
    case CheckpointLayout::kPattern: return FindByPattern(listed, *pattern);
    default: return FindForLayout(spec.layout, root, listed);
  }
}

}  // namespace

absl::StatusOr<std::optional<CheckpointRef>> FindNewestCheckpoint(const CheckpointSpec& spec) {
  absl::StatusOr<Found> found = ListCheckpoints(spec);
  if (!found.ok()) return found.status();
  if (found->empty()) return std::nullopt;
  return CheckpointRef{found->rbegin()->second, found->rbegin()->first};
}

absl::StatusOr<std::vector<std::int64_t>> ListCompleteSteps(const CheckpointSpec& spec) {
  absl::StatusOr<Found> found = ListCheckpoints(spec);
  if (!found.ok()) return found.status();
  std::vector<std::int64_t> steps;
  for (const auto& [step, path] : *found) steps.push_back(step);
  return steps;
}

absl::StatusOr<std::optional<CheckpointRef>> FindCheckpointAtStep(const CheckpointSpec& spec, std::int64_t step) {
  absl::StatusOr<Found> found = ListCheckpoints(spec);
  if (!found.ok()) return found.status();
  const auto it = found->find(step);
  if (it == found->end()) return std::nullopt;
  return CheckpointRef{it->second, step};
}

}  // namespace tpud
