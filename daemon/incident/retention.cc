#include "daemon/incident/retention.h"

#include <sys/stat.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tpud::incident {
namespace fs = std::filesystem;

namespace {

std::chrono::system_clock::time_point ModificationTime(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) +
                                               std::chrono::nanoseconds(st.st_mtim.tv_nsec));
}

std::uint64_t RegularBytes(const fs::path& dir) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!fs::is_regular_file(it->symlink_status(file_ec))) continue;
    const std::uint64_t size = it->file_size(file_ec);
    if (!file_ec) bytes += size;
  }
  return bytes;
}

// The removal time of DIR/JOB.removed-UNIXMS, or nullopt for a job's own directory.
std::optional<std::chrono::system_clock::time_point> RemovedAt(const std::string& name) {
  const std::size_t at = name.rfind(".removed-");
  std::int64_t unix_ms = 0;
  if (at == std::string::npos || at == 0 || !absl::SimpleAtoi(name.substr(at + 9), &unix_ms) || unix_ms <= 0) {
    return std::nullopt;
  }
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(unix_ms));
}

bool IsDirectory(const fs::directory_entry& entry) {
  std::error_code ec;
  return fs::is_directory(entry.symlink_status(ec));  // A link is never walked into.
}

}  // namespace

std::vector<StoredBundle> ListStoredBundles(const fs::path& dir) {
  std::vector<StoredBundle> bundles;
  std::error_code ec;
  for (fs::directory_iterator job(dir, ec), end; !ec && job != end; job.increment(ec)) {
    if (!IsDirectory(*job)) continue;
    const auto removed_at = RemovedAt(job->path().filename().string());
    std::error_code inner;
    for (fs::directory_iterator b(job->path(), inner); !inner && b != end; b.increment(inner)) {
      if (!IsDirectory(*b)) continue;
      bundles.push_back(StoredBundle{b->path(), removed_at.has_value(), ModificationTime(b->path()),
                                     removed_at.value_or(std::chrono::system_clock::time_point()),
                                     RegularBytes(b->path())});
    }
  }
  return bundles;
}

std::vector<Removal> SelectForRemoval(const std::vector<StoredBundle>& bundles, const RetentionPolicy& policy,
                                          std::chrono::system_clock::time_point now, const fs::path& keep) {
  std::vector<std::size_t> order(bundles.size());
  std::iota(order.begin(), order.end(), 0);
  // Removal order: removed jobs' first, then the oldest.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (bundles[a].removed != bundles[b].removed) return bundles[a].removed;
    if (bundles[a].written != bundles[b].written) return bundles[a].written < bundles[b].written;
    return bundles[a].dir < bundles[b].dir;
  });
  std::uint64_t total = 0;
  for (const StoredBundle& b : bundles) total += b.bytes;
  std::vector<Removal> chosen;
  for (std::size_t i : order) {
    const StoredBundle& b = bundles[i];
    if (b.dir == keep) continue;
    if (b.removed && now - b.removed_at >= policy.removed_keep) {
      chosen.push_back(Removal{i, absl::StrCat("its job was removed more than ",
                                               std::chrono::duration_cast<std::chrono::hours>(policy.removed_keep).count(),
                                               " h ago (incidents.removed_keep_days)")});
    } else if (policy.max_bytes > 0 && total > policy.max_bytes) {
      chosen.push_back(Removal{i, absl::StrCat("the bundles took ", total, " bytes, over incidents.max_bytes (",
                                               policy.max_bytes, "); the oldest go first")});
    } else {
      continue;
    }
    total -= b.bytes;
  }
  return chosen;
}

std::vector<std::string> ApplyRetention(const fs::path& dir, const RetentionPolicy& policy, const fs::path& keep) {
  const std::vector<StoredBundle> bundles = ListStoredBundles(dir);
  std::vector<std::string> lines;
  for (const Removal& removal : SelectForRemoval(bundles, policy, std::chrono::system_clock::now(), keep)) {
    const StoredBundle& b = bundles[removal.index];
    std::error_code ec;
    fs::remove_all(b.dir, ec);
    if (ec) {
      lines.push_back(absl::StrCat("incident bundle ", b.dir.string(), " could not be removed: ", ec.message()));
      continue;
    }
    lines.push_back(absl::StrCat("incident bundle ", b.dir.string(), " (", b.bytes, " bytes) removed: ", removal.why));
    if (b.removed) {
      std::error_code empty_ec;
      if (fs::is_empty(b.dir.parent_path(), empty_ec) && !empty_ec) fs::remove(b.dir.parent_path(), empty_ec);
    }
  }
  return lines;
}

}  // namespace tpud::incident
