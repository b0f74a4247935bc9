#include "daemon/shim/output_buffer.h"

#include <algorithm>

namespace tpud::shim {
namespace {
// Bytes per queue item, so taking from the front never moves megabytes.
constexpr std::size_t kItemBytes = 64 * 1024;
}  // namespace

void OutputBuffer::Append(std::string_view data) {
  if (data.empty()) return;
  if (skipping_) {
    const std::size_t newline = data.find('\n');
    const std::size_t skipped = newline == std::string_view::npos ? data.size() : newline + 1;
    AddGapAtBack(skipped);
    skipping_ = newline == std::string_view::npos;
    data.remove_prefix(skipped);
  }
  if (data.empty()) return;
  if (size_ + data.size() > max_bytes_) {
    AddGapAtBack(data.size());
    skipping_ = data.back() != '\n';
    return;
  }
  AppendBytes(data);
}

void OutputBuffer::AppendBytes(std::string_view data) {
  size_ += data.size();
  if (!items_.empty() && !items_.back().gap &&
      items_.back().bytes.size() + data.size() <= kItemBytes) {
    items_.back().bytes.append(data);
    return;
  }
  items_.push_back(Item{false, std::string(data), 0});
}

std::optional<std::uint64_t> OutputBuffer::TakeGap() {
  if (items_.empty() || !items_.front().gap) return std::nullopt;
  const std::uint64_t dropped = items_.front().dropped;
  items_.pop_front();
  return dropped;
}

std::string OutputBuffer::Take(std::size_t max_bytes) {
  if (items_.empty() || items_.front().gap) return {};
  std::string& front = items_.front().bytes;
  const std::size_t n = std::min(max_bytes, front.size());
  std::string taken = front.substr(0, n);
  front.erase(0, n);
  if (front.empty()) items_.pop_front();
  size_ -= n;
  return taken;
}

void OutputBuffer::Disconnected(std::string_view unsent, bool delivered_mid_line) {
  const bool mid_line = unsent.empty() ? delivered_mid_line : unsent.back() != '\n';
  if (unsent.empty() && !mid_line) return;  // Nothing lost, nothing cut.
  // Behind a gap, the bytes already start a line.
  const bool resynced = !items_.empty() && items_.front().gap;
  AddGapAtFront(unsent.size());
  if (!resynced && mid_line) SkipRestOfLineAfterFrontGap();
}

void OutputBuffer::SkipRestOfLineAfterFrontGap() {
  while (items_.size() > 1 && !items_[1].gap) {
    std::string& bytes = items_[1].bytes;
    const std::size_t newline = bytes.find('\n');
    const std::size_t skipped = newline == std::string::npos ? bytes.size() : newline + 1;
    items_[0].dropped += skipped;
    dropped_total_ += skipped;
    size_ -= skipped;
    bytes.erase(0, skipped);
    if (bytes.empty()) items_.erase(items_.begin() + 1);
    if (newline != std::string::npos) return;
  }
  if (items_.size() > 1) {  // Another gap: what follows it starts a line.
    items_[0].dropped += items_[1].dropped;
    items_.erase(items_.begin() + 1);
  } else {
    skipping_ = true;  // The line goes on in output not read yet.
  }
}

void OutputBuffer::AddGapAtBack(std::uint64_t bytes) {
  dropped_total_ += bytes;
  if (!items_.empty() && items_.back().gap) {
    items_.back().dropped += bytes;
  } else {
    items_.push_back(Item{true, {}, bytes});
  }
}

void OutputBuffer::AddGapAtFront(std::uint64_t bytes) {
  dropped_total_ += bytes;
  if (!items_.empty() && items_.front().gap) {
    items_.front().dropped += bytes;
  } else {
    items_.push_front(Item{true, {}, bytes});
  }
}

}  // namespace tpud::shim
