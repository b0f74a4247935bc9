// Ending a followed stream (`logs -f`, `events -f`) cleanly on Ctrl-C.
#pragma once

#include <atomic>
#include <signal.h>
#include <thread>

#include <grpcpp/grpcpp.h>

namespace tpud::client {

// While alive, SIGINT cancels `context` (ClientContext::TryCancel) instead of
// killing the process, so the stream's Read() returns false, Finish() reports
// CANCELLED and the command can exit 0. The signal handler only writes to a
// self-pipe; a helper thread does the cancelling. The previous SIGINT
// disposition is restored on destruction.
//
// `context` must outlive this object. At most one instance may exist at a
// time (the handler is process-wide). An inherited SIG_IGN is left alone; if
// the pipe cannot be set up, SIGINT keeps its default action (the process
// dies with status 130).
// Thread-safety: construct and destroy on the same thread.
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(grpc::ClientContext* context);
  ~CancelOnInterrupt();

  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;

  // True once SIGINT has arrived and the context was cancelled.
  bool interrupted() const { return interrupted_.load(); }

 private:
  void WatchPipe();

  grpc::ClientContext* context_;
  std::atomic<bool> interrupted_{false};
  bool installed_ = false;
  struct sigaction previous_action_ {};
  std::thread watcher_;
};

}  // namespace tpud::client
