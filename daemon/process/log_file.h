// A job's log file: appended raw, rotated by size with a bounded number of backups.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/launch_spec.h"
#include "daemon/core/lines.h"

namespace tpud {

// Appends bytes to `path`; when the next write would take it past max_bytes,
// renames path -> path.1 -> ... -> path.N first (path.N, the oldest backup, is
// replaced). The current file is never deleted.
// Thread-safety: not thread-safe; one owner.
class RotatingLogFile {
 public:
  // Who owns the files it creates (a job running as another user must be able
  // to read its own log).
  struct Owner {
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
  };

  // Opens (creating, mode 0640, and creating missing parent directories) for
  // append; with `owner`, the file (and each one rotation creates) is chowned
  // to it. Errors name the path; Unavailable when the cause is transient
  // (ENOSPC, EMFILE, ENFILE, ENOMEM: retry later), else Internal.
  static absl::StatusOr<RotatingLogFile> Open(std::filesystem::path path, std::uint64_t max_bytes,
                                              int backups, std::optional<Owner> owner = std::nullopt);
  RotatingLogFile(RotatingLogFile&& other) noexcept;
  RotatingLogFile& operator=(RotatingLogFile&& other) noexcept;
  RotatingLogFile(const RotatingLogFile&) = delete;
  RotatingLogFile& operator=(const RotatingLogFile&) = delete;
  ~RotatingLogFile();

  // Writes all of `data` (retrying short writes). A failed rotation keeps
  // appending to the current file rather than losing output. What a failed
  // write (a full disk: ENOSPC) could not write is counted in
  // dropped_bytes() and lost; the next Append tries again, so writing
  // resumes by itself once there is room.
  absl::Status Append(std::string_view data);
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const { return size_; }
  // Bytes given to Append that never reached the file, since Open.
  std::uint64_t dropped_bytes() const { return dropped_bytes_; }
  // True while the last Append failed (an episode of dropping).
  bool dropping() const { return dropping_; }

 private:
  RotatingLogFile(std::filesystem::path path, int fd, std::uint64_t size, std::uint64_t max_bytes,
                  int backups, std::optional<Owner> owner);
  absl::Status Rotate();

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t max_bytes_ = 0;
  int backups_ = 0;
  std::optional<Owner> owner_;
  std::uint64_t dropped_bytes_ = 0;
  bool dropping_ = false;
};

// The RotatingLogFile owner for `spec` (its run_as user), if any.
std::optional<RotatingLogFile::Owner> LogOwner(const LaunchSpec& spec);

// The last `count` lines of the log at `path`, reading into path.1 when the
// current file holds fewer. Each returned line keeps its '\n'. A missing file
// yields no lines. Reads at most about 16 MiB.
absl::StatusOr<std::vector<std::string>> ReadLastLines(const std::filesystem::path& path, int count);

// Splits a byte stream into lines; a line longer than max_line_bytes is
// emitted in pieces. Thread-safety: one owner.
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line_bytes = 64 * 1024) : max_line_bytes_(max_line_bytes) {}
  // Calls fn(line) for each complete line in `data` (without '\n').
  template <typename Fn>
  void Feed(std::string_view data, Fn&& fn);
  // The same lines, in order, as blocks: fn(block) where `block` is one or
  // more lines, each ending in '\n' (split them with ForEachLine). Most of
  // `data` passes as one view into it, so a consumer can look at a whole
  // block at once (one regex pass instead of one per line); a line completing
  // a buffered one, and the pieces of an overlong line, come as copies.
  template <typename Fn>
  void FeedBlocks(std::string_view data, Fn&& fn);
  // Emits whatever partial line is buffered.
  template <typename Fn>
  void Flush(Fn&& fn) {
    if (!partial_.empty()) fn(std::string_view(partial_));
    partial_.clear();
  }

 private:
  template <typename Fn>
  void EmitCopy(std::string_view line, Fn& fn) {
    copy_.assign(line);
    copy_.push_back('\n');
    fn(std::string_view(copy_));
  }

  std::size_t max_line_bytes_;
  std::string partial_;
  std::string copy_;  // A line with its '\n', for FeedBlocks.
};

template <typename Fn>
void LineSplitter::FeedBlocks(std::string_view data, Fn&& fn) {
  auto emit_copy = [&](std::string_view line) { EmitCopy(line, fn); };
  if (!partial_.empty()) {  // Finish the buffered line first, by Feed's rules.
    const std::size_t nl = data.find('\n');
    const std::size_t head = nl == std::string_view::npos ? data.size() : nl + 1;
    Feed(data.substr(0, head), emit_copy);
    data.remove_prefix(head);
  }
  const std::size_t last = data.rfind('\n');
  if (last != std::string_view::npos) {
    std::string_view lines = data.substr(0, last + 1);
    data.remove_prefix(last + 1);
    if (lines.size() > max_line_bytes_ + 1) {
      // Some line may be overlong: pass runs of short lines, pieces of long ones.
      std::size_t run = 0, at = 0;
      while (at < lines.size()) {
        const std::size_t end = lines.find('\n', at);
        if (end - at > max_line_bytes_) {
          if (at > run) fn(lines.substr(run, at - run));
          Feed(lines.substr(at, end + 1 - at), emit_copy);
          run = end + 1;
        }
        at = end + 1;
      }
      lines.remove_prefix(run);
    }
    if (!lines.empty()) fn(lines);
  }
  Feed(data, emit_copy);  // An unfinished tail: buffered (or overlong pieces emitted).
}

template <typename Fn>
void LineSplitter::Feed(std::string_view data, Fn&& fn) {
  while (!data.empty()) {
    const std::size_t nl = data.find('\n');
    const bool complete = nl != std::string_view::npos;
    const std::string_view segment = complete ? data.substr(0, nl) : data;
    if (!partial_.empty()) {
      const std::size_t room = max_line_bytes_ - partial_.size();
      if (segment.size() > room) {  // The buffered line fills up: emit a full piece.
        partial_.append(segment.substr(0, room));
        fn(std::string_view(partial_));
        partial_.clear();
        data.remove_prefix(room);
        continue;
      }
      partial_.append(segment);
      if (!complete) return;
      fn(std::string_view(partial_));
      partial_.clear();
    } else if (segment.size() > max_line_bytes_) {
      fn(segment.substr(0, max_line_bytes_));
      data.remove_prefix(max_line_bytes_);
      continue;
    } else if (!complete) {
      partial_.assign(segment);  // Only a line's unfinished tail is ever copied.
      return;
    } else {
      fn(segment);
    }
    data.remove_prefix(nl + 1);
  }
}

}  // namespace tpud
