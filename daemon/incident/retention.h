// What tpud keeps of its incident bundles (bundle.h) under state_dir/incidents,
// and what it removes first when they take too much room.
//
// Layout read here (written by Capture and IncidentCapturer::Retire):
//   DIR/JOB/N/                   a bundle of a configured or submitted job
//   DIR/JOB/N.replaced-UNIXMS/   an earlier bundle of the same number
//   DIR/JOB.removed-UNIXMS/N/    a bundle of a job since removed (tpuctl remove)
//
// tpud removes only these directories, never a log or a checkpoint.
// Thread-safety: pure functions, or functions of the filesystem: safe from any
// thread; ApplyRetention must not race a Capture into the same DIR (the
// capture thread runs both, one after the other).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tpud::incident {

struct RetentionPolicy {
  // All bundles together, in bytes of regular files; 0: no cap.
  std::uint64_t max_bytes = 1ull << 30;
  // A removed job's bundles are kept this long after its removal.
  std::chrono::seconds removed_keep{std::chrono::hours(24 * 7)};
};

struct StoredBundle {
  std::filesystem::path dir;
  bool removed = false;                          // Of a removed job (DIR/JOB.removed-MS/...).
  std::chrono::system_clock::time_point written;  // Modification time of its directory.
  std::chrono::system_clock::time_point removed_at;  // removed: when its job was (the MS suffix).
  std::uint64_t bytes = 0;                       // Its regular files (links not followed).
};

// Every bundle under `dir`, in no particular order. Unreadable entries are skipped.
std::vector<StoredBundle> ListStoredBundles(const std::filesystem::path& dir);

struct Removal {
  std::size_t index;  // Into the bundles given.
  std::string why;    // "its job was removed more than 168 h ago", "all bundles over incidents.max_bytes (...)".
};

// Which of `bundles` to remove, in removal order: each bundle of a job
// removed more than policy.removed_keep ago (0: at once); and, while the rest exceed
// policy.max_bytes, the oldest bundles, a removed job's before any other.
// `keep` (the bundle just captured) is never chosen.
std::vector<Removal> SelectForRemoval(const std::vector<StoredBundle>& bundles, const RetentionPolicy& policy,
                                          std::chrono::system_clock::time_point now,
                                          const std::filesystem::path& keep);

// Lists, selects and removes; a removed job's directory left empty goes too.
// Returns one line per bundle removed and per removal that failed (for the
// log: nothing is removed silently).
std::vector<std::string> ApplyRetention(const std::filesystem::path& dir, const RetentionPolicy& policy,
                                        const std::filesystem::path& keep);

}  // namespace tpud::incident
