#include "daemon/classify/classify_logs.h"

#include <sys/stat.h>

#include <cerrno>
#include <iostream>
#include <string_view>
#include <vector>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpud {

namespace {

// Lines longer than this are cut: the classifier sees their first 64 KiB,
// and a file with no newline at all costs no more memory than that.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

// Scans `in` line by line (a trailing '\r' dropped), each line capped.
void ScanStream(std::istream& in, AttemptScanner& scanner) {
  std::string line;
  bool cut = false;
  const auto emit = [&] {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    scanner.ScanLine(line);
    line.clear();
    cut = false;
  };
  std::vector<char> buffer(64 * 1024);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(in.gcount()));
    while (!chunk.empty()) {
      const std::size_t newline = chunk.find('\n');
      const std::string_view part = chunk.substr(0, newline);
      if (!cut) {
        const std::size_t room = kMaxLineBytes - line.size();
        cut = part.size() > room;
        line.append(part.substr(0, room));
      }
      if (newline == std::string_view::npos) break;
      emit();
      chunk.remove_prefix(newline + 1);
    }
  }
  if (!line.empty() || cut) emit();
}

// Why `path` is not read: anything but a regular file (a FIFO would block, a
// device like /dev/zero never ends); "-" is standard input, read on purpose.
absl::Status CheckRegularFile(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(path.string(), ": cannot open"));
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": is a directory"));
  const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return absl::InvalidArgumentError(
      absl::StrCat(path.string(), ": is ", what, "; classify reads regular files, or - for standard input"));
}

}  // namespace

absl::StatusOr<LogVerdict> ClassifyLogFile(const std::filesystem::path& path,
                                           std::shared_ptr<const FailureClassifier> classifier,
                                           const ExitStatus& exit) {
  AttemptScanner scanner(std::move(classifier));
  if (path == "-") {
    ScanStream(std::cin, scanner);
    if (std::cin.bad()) return absl::DataLossError("standard input: read error");
  } else {
    if (absl::Status regular = CheckRegularFile(path); !regular.ok()) return regular;
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::ErrnoToStatus(errno, absl::StrCat(path.string(), ": cannot open"));
    ScanStream(in, scanner);
    if (in.bad()) return absl::ErrnoToStatus(errno, absl::StrCat(path.string(), ": read error"));
  }
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
