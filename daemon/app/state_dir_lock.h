// One tpud per state_dir: two daemons on one state_dir would each re-attach
// to the same attempts and restart jobs the other runs, putting two trainers
// on one checkpoint directory.
#pragma once

#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"

namespace tpud {

// An exclusive flock(2) on STATE_DIR/tpud.lock, held until destroyed (or
// until the process dies: the kernel releases it, so a crashed tpud never
// blocks the next one). The file holds the holder's pid, for the message.
class StateDirLock {
 public:
  // Takes the lock without waiting. Errors: FailedPrecondition
  // "state_dir /x is in use by tpud (pid N)" when another process holds it;
  // Internal naming the file when it cannot be opened or written.
  static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(const std::filesystem::path& state_dir);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace tpud
