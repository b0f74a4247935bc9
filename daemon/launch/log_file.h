// A job's log file: appended raw, rotated by size with a bounded number of backups.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpud {

// Appends bytes to `path`; when the next write would take it past max_bytes,
// renames path -> path.1 -> ... -> path.N first (path.N, the oldest backup, is
// replaced). The current file is never deleted.
// Thread-safety: not thread-safe; one owner.
class RotatingLogFile {
 public:
  // Opens (creating, mode 0640, and creating missing parent directories) for
  // append. Errors name the path.
  static absl::StatusOr<RotatingLogFile> Open(std::filesystem::path path, std::uint64_t max_bytes,
                                              int backups);
  RotatingLogFile(RotatingLogFile&& other) noexcept;
  RotatingLogFile& operator=(RotatingLogFile&& other) noexcept;
  RotatingLogFile(const RotatingLogFile&) = delete;
  RotatingLogFile& operator=(const RotatingLogFile&) = delete;
  ~RotatingLogFile();

  // Writes all of `data` (retrying short writes). A failed rotation keeps
  // appending to the current file rather than losing output.
  absl::Status Append(std::string_view data);
  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const { return size_; }

 private:
  RotatingLogFile(std::filesystem::path path, int fd, std::uint64_t size, std::uint64_t max_bytes,
                  int backups);
  absl::Status Rotate();

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t max_bytes_ = 0;
  int backups_ = 0;
};

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
  // Emits whatever partial line is buffered.
  template <typename Fn>
  void Flush(Fn&& fn) {
    if (!partial_.empty()) fn(std::string_view(partial_));
    partial_.clear();
  }

 private:
  std::size_t max_line_bytes_;
  std::string partial_;
};

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
