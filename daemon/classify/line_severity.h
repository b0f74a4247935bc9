// The severity a log line declares in its prefix, seen through the noise
// that real TPU job output puts in front of it.
//
// Recognised markers (the first one after the noise decides):
//   glog/absl   "E0314 20:41:46.478280 30673 file.cc:770] ...", "F0000 00:00:1716973077.466057 ..."
//               (severity letter, MMDD, time; github.com/abseil/abseil-cpp absl/log/log_entry.h)
//   TF C++      "2022-08-19 19:16:08.122420: W tensorflow/core/...cc:157] ..." and PyTorch/XLA's
//               "...: I    7449 tensorflow/.../mesh_service.cc:208] ..." (tensorflow
//               tsl/platform/default/logging.cc)
//   Python      "INFO:tensorflow:...", "WARNING:absl:...", "ERROR: ...", and logging's
//               "... - jax._src.lib.xla_bridge - WARNING - ..." (docs.python.org/3/library/logging.html)
//   warnings    ".../xla_bridge.py:130: UserWarning: ..." (docs.python.org/3/library/warnings.html)
// Noise skipped before the marker: whitespace, ISO/TF timestamps, IPv4
// addresses, bracketed tags ("[1]", "[rank0]:"), Ray's "(Worker pid=N)" /
// "(pid=N, ip=A)", tqdm progress bars glued to the line ("50%|██| 1/2 [00:01<00:01, 1.21s/it]"),
// "err:"/"stderr:" wrappers and "-", "|", "#" separators.
// Everything else ("RuntimeError: ...", "  (1) Unavailable: ...") is unmarked.
#pragma once

#include <string_view>

namespace tpud {

enum class LineSeverity {
  kUnmarked,  // No marker: Python exception lines, shell messages, raw stderr.
  kDebug,
  kInfo,
  kWarning,
  kError,
  kFatal,
};

// The severity `line` declares. Pure and thread-safe; costs a few anchored
// RE2 matches, so call it only for lines that matched a rule.
LineSeverity ParseLineSeverity(std::string_view line);

// "unmarked", "debug", "info", "warning", "error", "fatal". Never null.
const char* LineSeverityName(LineSeverity severity);

// Whether a line of this severity reports an error: unmarked (an exception
// or a crash message carries no prefix), error or fatal.
inline bool IsErrorSeverity(LineSeverity severity) {
  return severity == LineSeverity::kUnmarked || severity == LineSeverity::kError ||
         severity == LineSeverity::kFatal;
}

}  // namespace tpud
