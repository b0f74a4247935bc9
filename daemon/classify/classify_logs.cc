#include "daemon/classify/classify_logs.h"

#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpud {

absl::StatusOr<LogVerdict> ClassifyLogFile(const std::filesystem::path& path,
                                           std::shared_ptr<const FailureClassifier> classifier,
                                           const ExitStatus& exit) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::ErrnoToStatus(errno, absl::StrCat(path.string(), ": cannot open"));
  AttemptScanner scanner(std::move(classifier));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    scanner.ScanLine(line);
  }
  if (in.bad()) return absl::ErrnoToStatus(errno, absl::StrCat(path.string(), ": read error"));
  LogVerdict verdict;
  verdict.file = path.string();
  verdict.lines = scanner.lines_scanned();
  verdict.verdict = scanner.Classify(exit, /*hung=*/false);
  return verdict;
}

std::string FormatLogVerdict(const LogVerdict& log) {
  const Classification& v = log.verdict;
  std::string out = absl::StrCat(log.file, "\n",
                                 "  class:  ", FailureClassName(v.failure_class), "\n",
                                 "  action: ", RecoveryActionName(v.action), "\n",
                                 "  rule:   ", v.rule, "\n");
  if (v.matched_line_number > 0) {
    absl::StrAppend(&out, "  line ", v.matched_line_number, ": ", v.matched_line, "\n");
  } else {
    absl::StrAppend(&out, "  line:   none (", log.lines, " lines read, none matched a rule)\n");
  }
  if (!v.hint.empty()) absl::StrAppend(&out, "  hint:   ", v.hint, "\n");
  return out;
}

std::string LogVerdictJson(const LogVerdict& log) {
  const Classification& v = log.verdict;
  const nlohmann::json object = {
      {"file", log.file},
      {"lines", log.lines},
      {"class", FailureClassName(v.failure_class)},
      {"action", RecoveryActionName(v.action)},
      {"rule", v.rule},
      {"line_number", v.matched_line_number},
      {"line", v.matched_line},
      {"hint", v.hint},
  };
  // Log lines are not always valid UTF-8: replace bad bytes rather than throw.
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tpud
