// Progress of a long wait (`reset-tpu`, `stop --wait`), on stderr so stdout
// keeps only the result: on a terminal one line rewritten in place with the
// elapsed time; otherwise one line per change, so a log shows each step once.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace tpud::client {

// How often the waits ask the daemon where things are (and redraw the
// elapsed time on a terminal).
inline constexpr std::chrono::milliseconds kProgressPollInterval{500};
// How often reset-tpu asks for the node: each ask may be a Cloud TPU API
// call (the daemon answers from its cache within a second), and a reset can
// take 30 minutes.
inline constexpr std::chrono::milliseconds kNodePollInterval{2000};

// Thread-safety: use from one thread.
class ProgressLine {
 public:
  // `prefix` starts each line ("reset-tpu"); `tty`: rewrite in place.
  ProgressLine(std::ostream* err, bool tty, std::string prefix);
  ~ProgressLine() { Done(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Where the wait is now, e.g. "node STOPPING". On a terminal
  // "PREFIX: WHAT (12.3s)" replaces the line; otherwise "PREFIX: +12.3s WHAT"
  // is printed when WHAT differs from the last one. Empty WHAT: nothing.
  void Update(const std::string& what);
  // Clears the terminal line (idempotent); nothing otherwise.
  void Done();

  // What Update prints for `what` after `elapsed_seconds`, without control
  // characters (for tests).
  static std::string Line(const std::string& prefix, const std::string& what, double elapsed_seconds, bool tty);

 private:
  std::ostream* err_;
  bool tty_;
  std::string prefix_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::string last_;
  bool drawn_ = false;
};

}  // namespace tpud::client
