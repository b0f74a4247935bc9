#include "daemon/slice/pending_proposals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/core/errno_status.h"

namespace tpud::slice {
namespace fs = std::filesystem;

namespace {

bool Same(const PendingProposal& kept, const std::string& job, const GangProposal& p) {
  return kept.job == job && kept.proposal.intent == p.intent && kept.proposal.base_generation == p.base_generation &&
         kept.proposal.worker == p.worker && kept.proposal.reason == p.reason;
}

absl::Status WriteError(const fs::path& path, const char* step, int err) {
  return absl::UnavailableError(absl::StrCat(path.string(), ": ", step, ": ", std::strerror(err)));
}

// tmp, fsync, rename, fsync of the directory: the content or the old file,
// never a torn one, and on disk before this returns.
absl::Status WriteDurably(const fs::path& path, const std::string& content) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return WriteError(tmp, "open", errno);
  if (absl::Status written = WriteAll(fd, content, tmp); !written.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return written;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return WriteError(tmp, "fsync", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return WriteError(path, "rename", err);
  }
  const int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return absl::OkStatus();
}

}  // namespace

PendingProposals::PendingProposals(fs::path path) : path_(std::move(path)) {}

bool PendingProposals::MustKeep(const GangProposal& proposal) {
  return proposal.intent == GangProposal::Intent::kStop || proposal.intent == GangProposal::Intent::kLeave;
}

absl::StatusOr<std::vector<PendingProposal>> PendingProposals::Load() {
  absl::MutexLock lock(&mu_);
  kept_.clear();
  if (path_.empty()) return kept_;
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return kept_;
    return absl::UnavailableError(absl::StrCat(path_.string(), ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<PendingProposal>> decoded = DecodePendingProposals(text.str());
  if (!decoded.ok()) {
    // Kept aside for a person, never overwritten by the next stop.
    const fs::path aside = path_.string() + ".damaged";
    std::error_code ec;
    fs::rename(path_, aside, ec);
    return absl::DataLossError(absl::StrCat(path_.string(), ": ", decoded.status().message(), "; kept as ",
                                            ec ? path_.string() : aside.string()));
  }
  kept_ = *std::move(decoded);
  return kept_;
}

absl::Status PendingProposals::Add(const std::string& job, const GangProposal& proposal) {
  if (path_.empty() || !MustKeep(proposal)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  kept_.push_back(PendingProposal{job, proposal});
  return Save();
}

absl::Status PendingProposals::Remove(const std::string& job, const GangProposal& proposal) {
  if (path_.empty() || !MustKeep(proposal)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (Same(*it, job, proposal)) {
      kept_.erase(it);
      return Save();
    }
  }
  return absl::OkStatus();
}

absl::Status PendingProposals::Save() {
  if (kept_.empty()) {
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return WriteError(path_, "unlink", errno);
    return absl::OkStatus();
  }
  return WriteDurably(path_, EncodePendingProposals(kept_));
}

}  // namespace tpud::slice
