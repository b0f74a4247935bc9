// Copying a process's output pipe into its log file on an asio loop: shared by
// LocalLauncher (in the daemon) and tpud-shim.
#pragma once

#include <array>
#include <cstdint>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <memory>
#include <string_view>

#include "daemon/process/log_file.h"

namespace tpud {

// Reads the pipe whenever it is readable, appends each chunk to the log, and
// only then hands the chunk to the sink, so whatever the sink sees is already
// in the log. Bytes are read only inside this class's own handlers (wait for
// readable, then read without blocking), never by a completed asio read still
// queued, so a Drain() from another handler can never overtake or overwrite
// bytes waiting to be delivered. The sink is never called from Start().
// A full disk does not stop the copying: a failed log write is dropped,
// counted (RotatingLogFile::dropped_bytes) and reported through the log
// health callback while it drops and once when writing works again; this
// process's own log gets one warning when dropping starts and one when it
// ends.
//
// Lifetime: held by shared_ptr; pending handlers keep it alive. Close() ends
// all sink calls. Thread-safety: use only on the thread running the loop.
class OutputCopier : public std::enable_shared_from_this<OutputCopier> {
 public:
  using Sink = std::function<void(std::string_view chunk)>;
  // Called when the log starts dropping output (dropping == true) and when it
  // writes again; `dropped_bytes` is the total lost since the log was opened.
  using LogHealth = std::function<void(std::uint64_t dropped_bytes, bool dropping)>;

  // Takes ownership of `pipe_fd` (made non-blocking) and `log`.
  static std::shared_ptr<OutputCopier> Create(boost::asio::io_context& io, int pipe_fd,
                                              RotatingLogFile log, Sink sink);
  // Set before Start().
  void SetLogHealth(LogHealth on_change) { log_health_ = std::move(on_change); }

  // Starts copying in the background until end of file or Close().
  void Start();
  // Copies everything readable right now, without blocking. Used after the
  // writers died: what they wrote is all in the pipe by then.
  void Drain();
  // Stops copying and closes the pipe; the sink is not called again.
  void Close();

  OutputCopier(boost::asio::io_context& io, int pipe_fd, RotatingLogFile log, Sink sink);

 private:
  enum class Copied { kAll, kMore, kEnd };  // Pipe empty; cap reached; EOF, error or closed.

  void CopyLater();
  void WaitReadable();
  void CopyAndContinue();
  // Reads and delivers up to about `max_bytes` (0: until the pipe is empty).
  Copied CopyAvailable(std::size_t max_bytes);
  void WriteToLog(std::string_view chunk);

  boost::asio::posix::stream_descriptor pipe_;
  RotatingLogFile log_;
  Sink sink_;
  LogHealth log_health_;
  bool open_ = true;
  std::array<char, 128 * 1024> buffer_{};
};

}  // namespace tpud
