// One end of a tpud <-> tpud-shim connection (frames as in protocol.h), on an
// asio loop. Used by both the shim and the daemon's ShimLauncher.
#pragma once

#include <boost/asio/local/stream_protocol.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/shim/wire/protocol.h"

namespace tpud::shim {

// Reads frames and hands each to on_frame; writes queued frames in order.
// Frames of unknown type are handed over too (the owner skips them).
//
// Callbacks run on the loop thread, never inline from Start() or Send().
// on_closed runs once, when the peer closes, on a read error, or on a frame
// over kMaxFramePayloadBytes (a write error only stops writing: frames the
// peer sent before it closed are still read); no callback runs after Close()
// or after on_closed, so an owner may destroy itself from any callback after
// Close().
//
// Lifetime: held by shared_ptr; pending handlers keep it alive.
// Thread-safety: use only on the thread running the socket's loop.
class FrameStream : public std::enable_shared_from_this<FrameStream> {
 public:
  using Socket = boost::asio::local::stream_protocol::socket;
  struct Callbacks {
    std::function<void(FrameType type, std::string_view payload)> on_frame;
    std::function<void()> on_sent;  // Optional: every queued frame has been written.
    std::function<void()> on_closed;
  };

  static std::shared_ptr<FrameStream> Create(Socket socket, Callbacks callbacks);
  FrameStream(Socket socket, Callbacks callbacks);

  // Starts reading frames.
  void Start();
  // Queues one frame. Ignored once closed.
  void Send(FrameType type, std::string_view payload);
  // Ready for more: nothing queued or being written, and writing has not
  // failed (after a write error, frames sent are dropped and the stream
  // reads on until the peer closes, then calls on_closed).
  bool idle() const { return writable_ && queue_.empty(); }
  bool open() const { return open_; }
  // The socket's fd (for poll(2) probes; do not read or write it).
  int native_handle() { return socket_.native_handle(); }
  // Closes the socket; no callback runs afterwards.
  void Close();

 private:
  void ReadHeader();
  void ReadPayload(std::uint32_t length);
  void WriteFront();
  void StopWriting();
  void Fail();

  Socket socket_;
  Callbacks callbacks_;
  bool open_ = true;
  bool writable_ = true;
  char header_[kFrameHeaderBytes] = {};
  std::string payload_;
  std::deque<std::string> queue_;  // queue_.front() is being written.
};

}  // namespace tpud::shim
