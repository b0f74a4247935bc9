#include "daemon/shim/wire/frame_stream.h"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace tpud::shim {
namespace asio = boost::asio;
using boost::system::error_code;

std::shared_ptr<FrameStream> FrameStream::Create(Socket socket, Callbacks callbacks) {
  return std::make_shared<FrameStream>(std::move(socket), std::move(callbacks));
}

FrameStream::FrameStream(Socket socket, Callbacks callbacks)
    : socket_(std::move(socket)), callbacks_(std::move(callbacks)) {}

void FrameStream::Start() { ReadHeader(); }

void FrameStream::ReadHeader() {
  asio::async_read(socket_, asio::buffer(header_, sizeof(header_)),
                   [self = shared_from_this()](const error_code& ec, std::size_t) {
                     if (!self->open_) return;
                     if (ec) return self->Fail();
                     const std::uint32_t length = DecodeFrameLength(self->header_);
                     if (length > kMaxFramePayloadBytes) return self->Fail();
                     self->ReadPayload(length);
                   });
}

void FrameStream::ReadPayload(std::uint32_t length) {
  payload_.resize(length);
  asio::async_read(socket_, asio::buffer(payload_),
                   [self = shared_from_this()](const error_code& ec, std::size_t) {
                     if (!self->open_) return;
                     if (ec) return self->Fail();
                     self->callbacks_.on_frame(static_cast<FrameType>(self->header_[0]),
                                               self->payload_);
                     if (self->open_) self->ReadHeader();
                   });
}

void FrameStream::Send(FrameType type, std::string_view payload) {
  if (!open_ || !writable_) return;
  queue_.push_back(EncodeFrame(type, payload));
  if (queue_.size() == 1) WriteFront();
}

void FrameStream::WriteFront() {
  asio::async_write(socket_, asio::buffer(queue_.front()),
                    [self = shared_from_this()](const error_code& ec, std::size_t) {
                      if (!self->open_) return;
                      if (ec) return self->StopWriting();
                      self->queue_.pop_front();
                      if (!self->queue_.empty()) return self->WriteFront();
                      if (self->callbacks_.on_sent) self->callbacks_.on_sent();
                    });
}

// The peer stopped reading, but what it sent before (a last signal, say)
// may still be unread: keep reading until it closes.
void FrameStream::StopWriting() {
  writable_ = false;
  queue_.clear();
}

void FrameStream::Fail() {
  Close();
  callbacks_.on_closed();
}

void FrameStream::Close() {
  open_ = false;
  error_code ec;
  socket_.shutdown(Socket::shutdown_both, ec);
  socket_.close(ec);
}

}  // namespace tpud::shim
