// One bidirectional gRPC stream driven from one thread with deadlines on every
// wait: the LeaseKeepAlive and Watch streams of lease_keepalive.cc and
// watcher.cc. Built on gRPC's completion-queue API (grpc/grpc
// include/grpcpp/support/async_stream.h) because the synchronous API cannot
// bound a Read(): a member that is stopped (SIGSTOP) or partitioned would
// block it forever.
//
// At most one write and one read are outstanding at a time, as gRPC requires;
// a Read() that timed out stays outstanding and the next Read() goes on
// waiting for it. Close() cancels what is outstanding, waits for gRPC to
// complete it (gRPC completes cancelled operations at once), and returns the
// stream's final status.
//
// Thread-safety: one thread drives the call; Cancel() may be called from any
// thread (grpc::ClientContext::TryCancel is thread-safe).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "daemon/etcd/endpoints.h"

namespace tpud::etcd {

// gRPC metadata asking a member to refuse service while it has no raft leader
// (etcd v3.4 etcdserver/api/v3rpc/rpctypes/md.go, v3rpc/interceptor.go).
inline constexpr char kRequireLeaderKey[] = "hasleader";
inline constexpr char kRequireLeaderValue[] = "true";

template <class Request, class Response>
class StreamCall {
 public:
  enum class ReadResult { kMessage, kTimeout, kEnded };

  // `prepare(ClientContext*, CompletionQueue*)` returns the not yet started
  // stream (a stub's PrepareAsync<Method>); the call starts at once.
  template <class Prepare>
  explicit StreamCall(Prepare prepare) {
    context_.AddMetadata(kRequireLeaderKey, kRequireLeaderValue);
    stream_ = prepare(&context_, &queue_);
    Post(kStart);
    stream_->StartCall(Tag(kStart));
  }
  ~StreamCall() {
    Close();
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }
  StreamCall(const StreamCall&) = delete;
  StreamCall& operator=(const StreamCall&) = delete;

  // True when the call started by `deadline`.
  bool Started(Deadline deadline) { return Completed(kStart, deadline); }

  // True when `request` was handed to the transport by `deadline`. After a
  // false the stream is unusable: Close() it.
  bool Write(const Request& request, Deadline deadline) {
    if (pending_[kWrite] || ended_) return false;
    Post(kWrite);
    stream_->Write(request, Tag(kWrite));
    return Completed(kWrite, deadline);
  }

  // Waits for the next message until `deadline`; kEnded when the stream has
  // ended (the server closed it, it broke, or it was cancelled).
  ReadResult Read(Deadline deadline) {
    if (ended_) return ReadResult::kEnded;
    if (!pending_[kRead]) {
      Post(kRead);
      stream_->Read(&response_, Tag(kRead));
    }
    if (!Await(kRead, deadline)) return ReadResult::kTimeout;
    if (!ok_[kRead]) ended_ = true;
    return ended_ ? ReadResult::kEnded : ReadResult::kMessage;
  }
  // The message the last kMessage Read() received.
  Response& response() { return response_; }

  void Cancel() { context_.TryCancel(); }

  // Ends the call (cancelling it unless the server already ended it) and
  // returns its final status. Idempotent.
  grpc::Status Close() {
    if (closed_) return status_;
    closed_ = true;
    if (!ended_) context_.TryCancel();
    for (int tag : {kStart, kWrite, kRead}) {
      // A dead stream completes its operations by itself; cancel anyway if one lingers.
      if (pending_[tag] && !Await(tag, Clock::now() + std::chrono::seconds(1))) context_.TryCancel();
      Await(tag, Deadline::max());
    }
    Post(kFinish);
    stream_->Finish(&status_, Tag(kFinish));
    Await(kFinish, Deadline::max());
    return status_;
  }

 private:
  enum : int { kStart, kWrite, kRead, kFinish, kTagCount };

  static void* Tag(int tag) { return reinterpret_cast<void*>(static_cast<intptr_t>(tag) + 1); }
  void Post(int tag) {
    pending_[tag] = true;
    ok_[tag] = false;
  }

  // Await(tag), then true when it succeeded. A failed start or write means
  // the stream is dead (gRPC: the status comes from Finish, uncancelled).
  bool Completed(int tag, Deadline deadline) {
    if (!Await(tag, deadline)) return false;
    if (!ok_[tag]) ended_ = true;
    return ok_[tag];
  }

  // Runs the queue until `tag` completes (true) or `deadline` passes (false;
  // the operation stays outstanding). Other completions are recorded.
  bool Await(int tag, Deadline deadline) {
    while (pending_[tag]) {
      void* got = nullptr;
      bool ok = false;
      const auto status = queue_.AsyncNext(&got, &ok, GrpcDeadline(deadline));
      if (status != grpc::CompletionQueue::GOT_EVENT) return false;
      const int done = static_cast<int>(reinterpret_cast<intptr_t>(got) - 1);
      pending_[done] = false;
      ok_[done] = ok;
    }
    return true;
  }

  grpc::CompletionQueue queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<Request, Response>> stream_;
  Response response_;
  std::array<bool, kTagCount> pending_{};
  std::array<bool, kTagCount> ok_{};
  bool ended_ = false;
  bool closed_ = false;
  grpc::Status status_;
};

}  // namespace tpud::etcd
