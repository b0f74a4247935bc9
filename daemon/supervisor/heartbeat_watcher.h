// Watches a job's heartbeat file and reports each change of its mtime.
//
// Uses inotify (inotify(7)) on the file's *directory*, so the file may be
// created, rewritten, touched or atomically replaced (write tmp + rename) by
// the job: IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO,
// filtered to the file's name. Each event re-reads the mtime and reports only
// when it differs from the last one seen, so one write that raises several
// events is one beat. The mtime the file has when watching starts is not a beat.
// Removing or renaming the directory ends the watch silently (no more beats;
// the hang timeout then does its job).
#pragma once

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"

namespace tpud {

// Thread-safety: create, use and destroy on the thread running `io`; the
// callback runs on that thread too, never after the watcher is destroyed.
class HeartbeatWatcher {
 public:
  using Callback = std::function<void()>;

  // Starts watching `file` (its directory must exist; the file need not).
  // Errors: NotFound / PermissionDenied / ResourceExhausted (inotify limits)
  // with the directory named, e.g.
  //   `heartbeat "/x/hb": watch directory "/x": No such file or directory`.
  static absl::StatusOr<std::unique_ptr<HeartbeatWatcher>> Start(boost::asio::io_context& io,
                                                                 std::filesystem::path file,
                                                                 Callback on_beat);
  ~HeartbeatWatcher();
  HeartbeatWatcher(const HeartbeatWatcher&) = delete;
  HeartbeatWatcher& operator=(const HeartbeatWatcher&) = delete;

  struct State;  // Shared with pending reads; defined in the .cc.

 private:
  explicit HeartbeatWatcher(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace tpud
