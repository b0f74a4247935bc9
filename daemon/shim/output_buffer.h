// The shim's queue of output bytes on their way to the daemon.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace tpud::shim {

// Output waiting to be streamed, bounded to max_bytes. Every byte is in the
// log before it gets here, so when the daemon is slow or absent and the queue
// is full, new output is dropped from the stream (never from the log). A drop
// leaves a gap in the queue, at the place where the bytes went missing, that
// the daemon is told about in order ('D' frame), and the stream resumes after
// the gap at the start of a line, so the daemon never sees the head of one
// line glued to the tail of another.
//
// The owner streams by calling TakeGap() (report a gap if one is next) then
// Take() (the bytes up to the next gap).
// Thread-safety: not thread-safe; one owner.
class OutputBuffer {
 public:
  explicit OutputBuffer(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // Queues new output; drops all of `data` if it does not fit.
  void Append(std::string_view data);
  // Removes the gap at the front of the queue and returns its size in bytes
  // (0 for a break without loss, after a reconnection); nullopt when bytes
  // (or nothing) come first.
  std::optional<std::uint64_t> TakeGap();
  // Removes and returns up to `max_bytes` of the bytes at the front of the
  // queue, stopping at a gap; empty when a gap (or nothing) comes first.
  std::string Take(std::size_t max_bytes);
  // The connection broke. `unsent`: bytes taken but perhaps not delivered;
  // `delivered_mid_line`: the last bytes delivered did not end a line. Unsent
  // bytes become a gap at the front, and when a line was cut, the rest of it
  // is skipped, so the next connection starts at a line start.
  void Disconnected(std::string_view unsent, bool delivered_mid_line);

  bool empty() const { return items_.empty(); }
  // Bytes queued, gaps excluded.
  std::size_t size() const { return size_; }
  std::uint64_t dropped_total() const { return dropped_total_; }

 private:
  // Either bytes or a gap of `dropped` bytes.
  struct Item {
    bool gap = false;
    std::string bytes;
    std::uint64_t dropped = 0;
  };

  void AddGapAtBack(std::uint64_t bytes);
  void AddGapAtFront(std::uint64_t bytes);
  // Moves the queued bytes after the front gap, up to and including the end
  // of their line, into that gap.
  void SkipRestOfLineAfterFrontGap();
  void AppendBytes(std::string_view data);

  std::size_t max_bytes_;
  std::deque<Item> items_;  // No two gaps are adjacent.
  std::size_t size_ = 0;
  // The last gap cut a line whose rest has not arrived yet: skip through its '\n'.
  bool skipping_ = false;
  std::uint64_t dropped_total_ = 0;
};

}  // namespace tpud::shim
