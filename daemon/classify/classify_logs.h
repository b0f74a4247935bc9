// Classifying saved logs offline, without a daemon: what `tpud classify`
// runs. Each log file is taken as the whole output of one failed attempt and
// gets the verdict the supervisor would have given it (classifier.h), with
// the number of the line that decided it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/classify/classifier.h"
#include "daemon/core/exit_status.h"

namespace tpud {

struct LogVerdict {
  std::string file;              // The path as given.
  std::size_t lines = 0;         // Lines read.
  Classification verdict;
};

// Reads `path` ("-": standard input) line by line as a stream (a trailing
// '\r' is dropped from each line, and a line is cut at 64 KiB, so memory is
// bounded whatever the input), scans every line with one AttemptScanner on
// `classifier`, and classifies the attempt as if it ended with `exit` (not
// hung). Errors name the file: "PATH: cannot open: No such file or
// directory" (the errno's status code), "PATH: is a directory" / "is a FIFO"
// / "is a character device" (InvalidArgument: only regular files, or "-"),
// "PATH: read error: ...".
// Thread-safe if `classifier` is (it is).
absl::StatusOr<LogVerdict> ClassifyLogFile(const std::filesystem::path& path,
                                           std::shared_ptr<const FailureClassifier> classifier,
                                           const ExitStatus& exit);

// The verdict for humans, one "key: value" per line, e.g.
//   train.log
//     class:  hbm_oom
//     action: fail
//     rule:   builtin:hbm_oom
//     line 12: jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: ...
//     hint:   the program does not fit in TPU HBM: ...
// ("line: none" when no line decided it). Ends with '\n'.
std::string FormatLogVerdict(const LogVerdict& verdict);

// The verdict as one JSON object on one line, keys "file", "lines", "class",
// "action", "rule", "line_number" (0: none), "line", "hint". No trailing '\n'.
std::string LogVerdictJson(const LogVerdict& verdict);

}  // namespace tpud
