#include "client/progress.h"

#include "client/format.h"

namespace tpud::client {

ProgressLine::ProgressLine(std::ostream* err, bool tty, std::string prefix)
    : err_(err), tty_(tty), prefix_(std::move(prefix)) {}

std::string ProgressLine::Line(const std::string& prefix, const std::string& what, double elapsed_seconds, bool tty) {
  if (tty) return prefix + ": " + what + " (" + FormatDowntime(elapsed_seconds) + ")";
  return prefix + ": +" + FormatDowntime(elapsed_seconds) + " " + what;
}

void ProgressLine::Update(const std::string& what) {
  if (what.empty() || err_ == nullptr) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) {
    *err_ << "\r\033[K" << Line(prefix_, what, elapsed, true) << std::flush;
    drawn_ = true;
  } else if (what != last_) {
    *err_ << Line(prefix_, what, elapsed, false) << "\n" << std::flush;
  }
  last_ = what;
}

void ProgressLine::Done() {
  if (!drawn_ || err_ == nullptr) return;
  *err_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

}  // namespace tpud::client
