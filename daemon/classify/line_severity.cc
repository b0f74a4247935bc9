#include "daemon/classify/line_severity.h"

#include <re2/re2.h>

#include <string>
#include <vector>

namespace tpud {
namespace {

// One piece of prefix noise, anchored (RE2::Consume matches at the start).
// Each alternative consumes at least one character.
constexpr char kNoise[] =
    R"((?:\s+)"
    R"(|\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?:?)"  // timestamps
    R"(|\d\d:\d\d:\d\d(?:[.,]\d+)?:?)"                                              // bare times
    R"(|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?)"                                          // worker IPs
    R"(|\[[^\]\n]{1,80}\]:?)"                                                       // [1], [rank0]:
    R"(|\((?:[^()\n]|\([^()\n]*\))*\bpid=\d+[^()\n]*\))"                            // (Worker pid=7)
    R"(|\d{1,3}%\|[^|\n]*\|[^\]\n]*\])"                                             // tqdm bars
    R"(|(?:std)?(?:err|out):)"                                                      // wrappers
    R"(|[-|#>]+))";                                                                 // separators

struct Marker {
  const char* pattern;  // Anchored at the start of the rest of the line; group 1 is the level.
};

constexpr Marker kMarkers[] = {
    {R"(([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\b)"},                          // glog / absl
    {R"(([IWEF]) +(?:\d+ +)?[\w./-]+:\d+\])"},                          // TF C++ after its timestamp
    {R"((DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?::|\s*-\s|\s*\]|\s*\|))"},  // Python logging
    {R"([\w.]+ - (DEBUG|INFO|WARNING|ERROR|CRITICAL) - )"},             // "%(name)s - %(levelname)s - "
    {R"(\S+\.py:\d+: \w*(Warning): )"},                                 // warnings.warn
};

LineSeverity FromLevel(const std::string& level) {
  if (level == "I" || level == "INFO") return LineSeverity::kInfo;
  if (level == "W" || level == "WARNING" || level == "WARN" || level == "Warning") {
    return LineSeverity::kWarning;
  }
  if (level == "E" || level == "ERROR") return LineSeverity::kError;
  if (level == "F" || level == "CRITICAL" || level == "FATAL") return LineSeverity::kFatal;
  if (level == "DEBUG") return LineSeverity::kDebug;
  return LineSeverity::kUnmarked;
}

const RE2& NoiseRegexp() {
  static const RE2* const noise = new RE2(kNoise);
  return *noise;
}

const std::vector<const RE2*>& MarkerRegexps() {
  static const auto* const markers = [] {
    auto* built = new std::vector<const RE2*>();
    for (const Marker& marker : kMarkers) built->push_back(new RE2(std::string("^") + marker.pattern));
    return built;
  }();
  return *markers;
}

}  // namespace

LineSeverity ParseLineSeverity(std::string_view line) {
  re2::StringPiece rest(line.data(), line.size());
  for (int i = 0; i < 16 && RE2::Consume(&rest, NoiseRegexp()); ++i) {
  }
  std::string level;
  for (const RE2* marker : MarkerRegexps()) {
    if (RE2::PartialMatch(rest, *marker, &level)) return FromLevel(level);
  }
  return LineSeverity::kUnmarked;
}

const char* LineSeverityName(LineSeverity severity) {
  switch (severity) {
    case LineSeverity::kUnmarked: return "unmarked";
    case LineSeverity::kDebug: return "debug";
    case LineSeverity::kInfo: return "info";
    case LineSeverity::kWarning: return "warning";
    case LineSeverity::kError: return "error";
    case LineSeverity::kFatal: return "fatal";
  }
  return "unmarked";
}

}  // namespace tpud
