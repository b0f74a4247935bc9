// The yaml-cpp adapter: the only file that includes yaml-cpp. Reading a
// document keeps its first error as "FILE:LINE: KEY.PATH: reason"; every
// parsed job spec then goes through ValidateJobSpec's rules, located in the
// file by the key path the rule names.
#include "daemon/config/config.h"

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <span>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/launch/launcher.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;
using absl::StrCat;
using Keys = std::span<const absl::string_view>;

constexpr absl::string_view kTopKeys[] = {"socket", "state_dir", "log_dir", "metrics", "jobs_dir", "jobs"};
constexpr absl::string_view kJobKeys[] = {"name",      "command",       "working_dir", "env",
                                          "autostart", "start_seconds", "checkpoint",  "resume_args",
                                          "restart",   "stop",          "log"};
constexpr absl::string_view kMetricsKeys[] = {"listen"};
constexpr absl::string_view kCheckpointKeys[] = {"dir", "layout", "pattern"};
constexpr absl::string_view kRestartKeys[] = {"max_restarts", "backoff_initial_seconds",
                                              "backoff_max_seconds", "backoff_jitter", "reset_after_seconds"};
constexpr absl::string_view kStopKeys[] = {"grace_seconds", "signals"};
constexpr absl::string_view kLogKeys[] = {"max_bytes", "backups"};

constexpr std::pair<CheckpointLayout, const char*> kLayoutNames[] = {
    {CheckpointLayout::kAuto, "auto"},          {CheckpointLayout::kTensorflow, "tensorflow"},
    {CheckpointLayout::kOrbax, "orbax"},        {CheckpointLayout::kHuggingface, "huggingface"},
    {CheckpointLayout::kTorchDcp, "torch_dcp"}, {CheckpointLayout::kLightning, "lightning"},
    {CheckpointLayout::kPattern, "pattern"}};

std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : StrCat(path, ".", key);
}

int LineOf(const YAML::Mark& mark) { return mark.is_null() ? 1 : mark.line + 1; }

fs::path Resolve(const fs::path& base, const fs::path& path) {
  return path.empty() || path.is_absolute() ? path : (base / path).lexically_normal();
}

// How a value reads in an error: a scalar quoted, anything else by its kind.
std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return StrCat("\"", node.Scalar(), "\"");
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "null";
}

// Keeps the first error met while reading one YAML document from `source`.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  const std::string& source() const { return source_; }
  std::string Where(const YAML::Mark& mark) const { return StrCat(source_, ":", LineOf(mark)); }
  // Records "SOURCE:LINE: KEY: reason" unless an error is already recorded.
  void Fail(const YAML::Mark& mark, absl::string_view key, absl::string_view reason) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(key.empty() ? StrCat(Where(mark), ": ", reason)
                                                     : StrCat(Where(mark), ": ", key, ": ", reason));
  }

 private:
  std::string source_;
  absl::Status status_;
};

// One key of a mapping: its value and where the key is written.
struct Entry {
  YAML::Node value;
  YAML::Mark mark;
  bool found = false;
};

Entry Find(const YAML::Node& map, absl::string_view key) {
  if (!map.IsMap()) return {};
  for (const auto& pair : map) {
    if (pair.first.IsScalar() && pair.first.Scalar() == key) {
      return {pair.second, pair.first.Mark(), true};
    }
  }
  return {};
}

// Where `key_path` ("restart.max_restarts", "command[0]") is written under
// `node` (itself at `mark`); the nearest written ancestor when it is absent.
YAML::Mark MarkOf(YAML::Node node, YAML::Mark mark, absl::string_view key_path) {
  for (absl::string_view part : absl::StrSplit(key_path, '.')) {
    const size_t bracket = part.find('[');
    const Entry entry = Find(node, part.substr(0, bracket));
    if (!entry.found) break;
    node.reset(entry.value);  // reset() rebinds; operator= would overwrite the node.
    mark = entry.mark;
    if (bracket == absl::string_view::npos) continue;
    size_t index = 0;
    if (!absl::SimpleAtoi(part.substr(bracket + 1, part.size() - bracket - 2), &index) ||
        !node.IsSequence() || index >= node.size()) {
      break;
    }
    const YAML::Node item = std::as_const(node)[index];
    mark = item.Mark();
    node.reset(item);
  }
  return mark;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "unknown key, did you mean restart? (known: name, command, ...)".
std::string UnknownKeyReason(absl::string_view key, Keys known) {
  std::string reason = "unknown key";
  size_t best = std::max<size_t>(2, key.size() / 3) + 1;
  absl::string_view suggestion;
  for (absl::string_view candidate : known) {
    if (const size_t distance = EditDistance(key, candidate); distance < best) {
      best = distance;
      suggestion = candidate;
    }
  }
  if (!suggestion.empty()) absl::StrAppend(&reason, ", did you mean ", suggestion, "?");
  absl::StrAppend(&reason, " (known: ", absl::StrJoin(known, ", "), ")");
  return reason;
}

// Checks that `node` (at `mark`) is a mapping of distinct keys, each in `known`
// unless `known` is empty. Null counts as an empty mapping.
bool ExpectMap(Reader& r, const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
               Keys known) {
  if (!r.ok() || node.IsNull()) return r.ok();
  if (!node.IsMap()) {
    r.Fail(mark, path, StrCat("expected a mapping, got ", Describe(node)));
    return false;
  }
  std::vector<std::string> seen;
  for (const auto& pair : node) {
    if (!pair.first.IsScalar()) {
      r.Fail(pair.first.Mark(), path, StrCat("expected a key, got ", Describe(pair.first)));
      break;
    }
    const std::string& key = pair.first.Scalar();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      r.Fail(pair.first.Mark(), Join(path, key), "duplicate key");
    } else if (!known.empty() && std::find(known.begin(), known.end(), key) == known.end()) {
      r.Fail(pair.first.Mark(), Join(path, key), UnknownKeyReason(key, known));
    }
    seen.push_back(key);
  }
  return r.ok();
}

// The mapping at `key` of `parent` once checked against `known`; nullopt when absent or bad.
std::optional<YAML::Node> Section(Reader& r, const YAML::Node& parent, const std::string& path,
                                  absl::string_view key, Keys known) {
  const Entry entry = Find(parent, key);
  if (!entry.found || !ExpectMap(r, entry.value, entry.mark, Join(path, key), known)) {
    return std::nullopt;
  }
  return entry.value;
}

const char* Expected(const std::string*) { return "a string"; }
const char* Expected(const fs::path*) { return "a path"; }
const char* Expected(const int*) { return "an integer"; }
const char* Expected(const double*) { return "a number"; }
const char* Expected(const bool*) { return "true or false"; }
template <typename Text>  // std::string or fs::path: numbers and booleans are taken as their text.
bool Decode(const YAML::Node& node, Text* out) {
  *out = node.Scalar();
  return true;
}
bool Decode(const YAML::Node& node, int* out) { return absl::SimpleAtoi(node.Scalar(), out); }
bool Decode(const YAML::Node& node, double* out) { return absl::SimpleAtod(node.Scalar(), out); }
bool Decode(const YAML::Node& node, bool* out) { return YAML::convert<bool>::decode(node, *out); }

// Reads the scalar at `key` of `map` into `*out`; leaves the default when absent.
template <typename T>
void Read(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key, T* out) {
  const Entry entry = Find(map, key);
  if (!r.ok() || !entry.found) return;
  T value{};
  if (!entry.value.IsScalar() || !Decode(entry.value, &value)) {
    return r.Fail(entry.mark, Join(path, key),
                  StrCat("expected ", Expected(out), ", got ", Describe(entry.value)));
  }
  *out = std::move(value);
}

// Calls `visit(item, item_path)` for each item of the list at `key`. Returns
// whether the list is present (null counts as an empty list) and well-formed.
template <typename Visit>
bool ForEachItem(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key,
                 absl::string_view what, Visit visit) {
  const Entry entry = Find(map, key);
  if (!r.ok() || !entry.found) return false;
  const std::string where = Join(path, key);
  if (!entry.value.IsNull() && !entry.value.IsSequence()) {
    r.Fail(entry.mark, where, StrCat("expected a list of ", what, ", got ", Describe(entry.value)));
  }
  for (size_t i = 0; r.ok() && entry.value.IsSequence() && i < entry.value.size(); ++i) {
    visit(entry.value[i], StrCat(where, "[", i, "]"));
  }
  return r.ok();
}

void ReadStrings(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key,
                 std::vector<std::string>* out) {
  std::vector<std::string> items;
  const bool found =
      ForEachItem(r, map, path, key, "strings", [&](const YAML::Node& item, const std::string& item_path) {
        if (!item.IsScalar()) {
          return r.Fail(item.Mark(), item_path, StrCat("expected a string, got ", Describe(item)));
        }
        items.push_back(item.Scalar());
      });
  if (found) *out = std::move(items);
}

void ReadSignals(Reader& r, const YAML::Node& stop, const std::string& path, std::vector<int>* out) {
  std::vector<int> signals;
  const bool found = ForEachItem(
      r, stop, path, "signals", "signals", [&](const YAML::Node& item, const std::string& item_path) {
        const int number = item.IsScalar() ? SignalNumber(item.Scalar()) : -1;
        if (number < 0) {
          return r.Fail(item.Mark(), item_path,
                        StrCat("unknown signal ", Describe(item), " (expected e.g. SIGTERM, TERM or 15)"));
        }
        signals.push_back(number);
      });
  if (found) *out = std::move(signals);
}

void ReadEnv(Reader& r, const YAML::Node& job, const std::string& path,
             std::map<std::string, std::string>* out) {
  const std::optional<YAML::Node> env = Section(r, job, path, "env", {});
  for (const auto& pair : env.value_or(YAML::Node())) {
    const std::string key = Join(Join(path, "env"), pair.first.Scalar());
    if (!pair.second.IsScalar()) {
      return r.Fail(pair.first.Mark(), key, StrCat("expected a string, got ", Describe(pair.second)));
    }
    (*out)[pair.first.Scalar()] = pair.second.Scalar();
  }
}

// 52428800, "50MB", "512KB", "10MiB", "1GiB": KB..TB are powers of 1000, KiB..TiB of 1024.
std::optional<std::uint64_t> ParseSize(const std::string& text) {
  static const LazyRE2 kSize = {R"((?i)\s*(\d+)\s*(b|[kmgt]i?b)?\s*)"};
  std::uint64_t value = 0;
  std::string unit;
  if (!RE2::FullMatch(text, *kSize, &value, &unit)) return std::nullopt;
  const std::uint64_t base = unit.find_first_of("iI") == std::string::npos ? 1000 : 1024;
  const size_t power =
      unit.empty() ? 0 : absl::string_view("BKMGT").find(static_cast<char>(std::toupper(unit[0])));
  for (size_t i = 0; i < power; ++i) {
    if (value > UINT64_MAX / base) return std::nullopt;
    value *= base;
  }
  return value;
}

void ReadSize(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key,
              std::uint64_t* out) {
  const Entry entry = Find(map, key);
  if (!r.ok() || !entry.found) return;
  const std::optional<std::uint64_t> size =
      entry.value.IsScalar() ? ParseSize(entry.value.Scalar()) : std::nullopt;
  if (!size) {
    return r.Fail(entry.mark, Join(path, key),
                  StrCat("expected a size in bytes such as 52428800, \"50MB\" or \"10MiB\", got ",
                         Describe(entry.value)));
  }
  *out = *size;
}

void ReadCheckpoint(Reader& r, const YAML::Node& job, const std::string& path, const fs::path& base,
                    CheckpointSpec* out) {
  const std::string where = Join(path, "checkpoint");
  const std::optional<YAML::Node> section = Section(r, job, path, "checkpoint", kCheckpointKeys);
  if (!section) return;
  Read(r, *section, where, "dir", &out->dir);
  out->dir = Resolve(base, out->dir);
  Read(r, *section, where, "pattern", &out->pattern);
  std::string layout = CheckpointLayoutName(out->layout);
  Read(r, *section, where, "layout", &layout);
  if (const std::optional<CheckpointLayout> parsed = ParseCheckpointLayout(layout)) {
    out->layout = *parsed;
    return;
  }
  std::vector<absl::string_view> known;
  for (const auto& [value, name] : kLayoutNames) known.push_back(name);
  r.Fail(Find(*section, "layout").mark, Join(where, "layout"),
         StrCat("unknown layout \"", layout, "\" (known: ", absl::StrJoin(known, ", "), ")"));
}

void ReadPolicies(Reader& r, const YAML::Node& job, const std::string& path, JobSpec* spec) {
  if (const auto restart = Section(r, job, path, "restart", kRestartKeys)) {
    const std::string where = Join(path, "restart");
    Read(r, *restart, where, "max_restarts", &spec->restart.max_restarts);
    Read(r, *restart, where, "backoff_initial_seconds", &spec->restart.backoff_initial_seconds);
    Read(r, *restart, where, "backoff_max_seconds", &spec->restart.backoff_max_seconds);
    Read(r, *restart, where, "backoff_jitter", &spec->restart.backoff_jitter);
    Read(r, *restart, where, "reset_after_seconds", &spec->restart.reset_after_seconds);
  }
  if (const auto stop = Section(r, job, path, "stop", kStopKeys)) {
    Read(r, *stop, Join(path, "stop"), "grace_seconds", &spec->stop.grace_seconds);
    ReadSignals(r, *stop, Join(path, "stop"), &spec->stop.signals);
  }
  if (const auto log = Section(r, job, path, "log", kLogKeys)) {
    ReadSize(r, *log, Join(path, "log"), "max_bytes", &spec->log.max_bytes);
    Read(r, *log, Join(path, "log"), "backups", &spec->log.backups);
  }
}

struct Violation {
  std::string key;  // Relative to the job spec, e.g. "restart.max_restarts".
  std::string reason;
};
using MaybeViolation = std::optional<Violation>;

MaybeViolation CheckNameAndCommand(const JobSpec& spec) {
  static const LazyRE2 kName = {"[a-z0-9][a-z0-9_.-]{0,62}"};
  if (spec.name.empty()) return Violation{"name", "required"};
  if (!RE2::FullMatch(spec.name, *kName)) {
    return Violation{"name", StrCat("must match [a-z0-9][a-z0-9_.-]{0,62}, got \"", spec.name, "\"")};
  }
  if (spec.command.empty()) return Violation{"command", "required: a non-empty list of strings (argv)"};
  if (spec.command[0].empty()) return Violation{"command[0]", "must not be empty"};
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return Violation{"env", StrCat("invalid variable name \"", key, "\"")};
    }
  }
  return std::nullopt;
}

MaybeViolation CheckTiming(const JobSpec& spec) {
  const RestartPolicy& restart = spec.restart;
  const std::pair<const char*, double> durations[] = {
      {"start_seconds", spec.start_seconds},
      {"restart.backoff_initial_seconds", restart.backoff_initial_seconds},
      {"restart.backoff_max_seconds", restart.backoff_max_seconds},
      {"restart.reset_after_seconds", restart.reset_after_seconds},
      {"stop.grace_seconds", spec.stop.grace_seconds}};
  for (const auto& [key, seconds] : durations) {
    if (!std::isfinite(seconds)) return Violation{key, StrCat("must be finite, got ", seconds)};
    if (seconds < 0) return Violation{key, StrCat("must be >= 0, got ", seconds)};
  }
  if (restart.max_restarts < 0) {
    return Violation{"restart.max_restarts", StrCat("must be >= 0, got ", restart.max_restarts)};
  }
  if (restart.backoff_max_seconds < restart.backoff_initial_seconds) {
    return Violation{"restart.backoff_max_seconds",
                     StrCat("must be >= restart.backoff_initial_seconds (", restart.backoff_initial_seconds,
                            "), got ", restart.backoff_max_seconds)};
  }
  if (!(restart.backoff_jitter >= 0 && restart.backoff_jitter <= 1)) {
    return Violation{"restart.backoff_jitter",
                     StrCat("must be between 0 and 1, got ", restart.backoff_jitter)};
  }
  return std::nullopt;
}

MaybeViolation CheckCheckpoint(const CheckpointSpec& checkpoint) {
  const std::string layout = CheckpointLayoutName(checkpoint.layout);
  if (layout == "unknown") return Violation{"checkpoint.layout", "unknown layout"};
  if (checkpoint.layout != CheckpointLayout::kPattern && !checkpoint.pattern.empty()) {
    return Violation{"checkpoint.pattern", StrCat("only allowed with layout pattern, got layout ", layout)};
  }
  if (checkpoint.layout == CheckpointLayout::kPattern) {
    if (checkpoint.pattern.empty()) return Violation{"checkpoint.pattern", "required with layout pattern"};
    const RE2 re(checkpoint.pattern, RE2::Quiet);
    if (!re.ok()) return Violation{"checkpoint.pattern", StrCat("invalid RE2 pattern: ", re.error())};
    if (re.NumberOfCapturingGroups() < 1) {
      return Violation{"checkpoint.pattern", "needs a capture group for the step, e.g. ckpt-(\\d+)"};
    }
  }
  if (checkpoint.dir.empty() && checkpoint.layout != CheckpointLayout::kAuto) {
    return Violation{"checkpoint.dir", StrCat("required with layout ", layout)};
  }
  return std::nullopt;
}

MaybeViolation CheckStopAndLog(const JobSpec& spec) {
  const std::vector<int>& signals = spec.stop.signals;
  if (signals.empty()) return Violation{"stop.signals", "must not be empty"};
  for (size_t i = 0; i < signals.size(); ++i) {
    if (SignalNumber(std::to_string(signals[i])) < 0) {
      return Violation{StrCat("stop.signals[", i, "]"), StrCat("unknown signal ", signals[i])};
    }
  }
  if (spec.log.backups < 0) return Violation{"log.backups", StrCat("must be >= 0, got ", spec.log.backups)};
  return std::nullopt;
}

MaybeViolation FindViolation(const JobSpec& spec) {
  if (MaybeViolation v = CheckNameAndCommand(spec)) return v;
  if (MaybeViolation v = CheckTiming(spec)) return v;
  if (MaybeViolation v = CheckCheckpoint(spec.checkpoint)) return v;
  return CheckStopAndLog(spec);
}

// Reads the job spec `node` (at `mark`, keys prefixed by `path`) and validates it.
void ParseJobNode(Reader& r, const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                  const fs::path& base, JobSpec* spec) {
  if (!ExpectMap(r, node, mark, path, kJobKeys)) return;
  Read(r, node, path, "name", &spec->name);
  ReadStrings(r, node, path, "command", &spec->command);
  Read(r, node, path, "working_dir", &spec->working_dir);
  spec->working_dir = Resolve(base, spec->working_dir);
  ReadEnv(r, node, path, &spec->env);
  Read(r, node, path, "autostart", &spec->autostart);
  Read(r, node, path, "start_seconds", &spec->start_seconds);
  ReadCheckpoint(r, node, path, base, &spec->checkpoint);
  ReadStrings(r, node, path, "resume_args", &spec->resume_args);
  ReadPolicies(r, node, path, spec);
  if (!r.ok()) return;
  if (const MaybeViolation v = FindViolation(*spec)) {
    r.Fail(MarkOf(node, mark, v->key), Join(path, v->key), v->reason);
  }
}

// Job names seen so far, each with the "FILE:LINE" that defined it.
using JobNames = std::map<std::string, std::string>;

void AddJob(Reader& r, const YAML::Node& node, const YAML::Mark& mark, const std::string& path, JobSpec spec,
            JobNames* names, DaemonConfig* config) {
  if (!r.ok()) return;
  const YAML::Mark name_mark = MarkOf(node, mark, "name");
  const auto [first, inserted] = names->emplace(spec.name, r.Where(name_mark));
  if (!inserted) {
    return r.Fail(name_mark, Join(path, "name"),
                  StrCat("duplicate job name \"", spec.name, "\", first defined at ", first->second));
  }
  spec.origin = StrCat("config:", r.source());
  config->jobs.push_back(std::move(spec));
}

// Parses `text` into its one YAML document (null when the text is empty).
absl::Status LoadDocument(const std::string& text, const std::string& source, YAML::Node* out) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(StrCat(source, ":", LineOf(e.mark), ": invalid YAML: ", e.msg));
  }
  if (documents.size() > 1) {
    return absl::InvalidArgumentError(StrCat(source, ":", LineOf(documents[1].Mark()),
                                             ": expected one YAML document, found ", documents.size()));
  }
  out->reset(documents.empty() ? YAML::Node() : documents[0]);
  return absl::OkStatus();
}

// Runs `parse`, turning a stray yaml-cpp exception into an error naming `source`.
template <typename Parse>
absl::Status CatchYaml(const std::string& source, Parse parse) {
  try {
    return parse();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat(source, ":", LineOf(e.mark), ": ", e.msg));
  }
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return absl::InvalidArgumentError(StrCat(path.string(), ": is a directory"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::ErrnoToStatus(errno, StrCat(path.string(), ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::ErrnoToStatus(errno, StrCat(path.string(), ": cannot read"));
  return text.str();
}

absl::Status ParseJobDocument(const std::string& text, const std::string& source, const fs::path& base,
                              YAML::Node* node, JobSpec* spec) {
  if (absl::Status status = LoadDocument(text, source, node); !status.ok()) return status;
  Reader r(source);
  ParseJobNode(r, *node, node->Mark(), "", base, spec);
  return r.status();
}

bool IsHostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  return colon != std::string::npos && absl::SimpleAtoi(listen.substr(colon + 1), &port) && port >= 0 &&
         port <= 65535;
}

void ReadTopLevel(Reader& r, const YAML::Node& root, const fs::path& base, DaemonConfig* config) {
  const std::pair<const char*, fs::path*> paths[] = {
      {"socket", &config->socket}, {"state_dir", &config->state_dir}, {"log_dir", &config->log_dir}};
  for (const auto& [key, path] : paths) {
    Read(r, root, "", key, path);
    if (r.ok() && path->empty()) r.Fail(Find(root, key).mark, key, "must not be empty");
    *path = Resolve(base, *path);
  }
  if (const auto metrics = Section(r, root, "", "metrics", kMetricsKeys)) {
    Read(r, *metrics, "metrics", "listen", &config->metrics.listen);
    const std::string& listen = config->metrics.listen;
    if (r.ok() && !listen.empty() && !IsHostPort(listen)) {
      r.Fail(Find(*metrics, "listen").mark, "metrics.listen",
             StrCat("expected host:port (port 0 picks a free one), got \"", listen, "\""));
    }
  }
  Read(r, root, "", "jobs_dir", &config->jobs_dir);
  config->jobs_dir = Resolve(base, config->jobs_dir);
  std::error_code ec;
  if (r.ok() && !config->jobs_dir.empty() && !fs::is_directory(config->jobs_dir, ec)) {
    r.Fail(Find(root, "jobs_dir").mark, "jobs_dir", StrCat("no such directory: ", config->jobs_dir.string()));
  }
}

absl::Status ParseDaemonDocument(const std::string& text, JobNames* names, DaemonConfig* config) {
  const std::string source = config->config_path.string();
  const fs::path base = config->config_path.parent_path();
  YAML::Node root;
  if (absl::Status status = LoadDocument(text, source, &root); !status.ok()) return status;
  Reader r(source);
  if (!ExpectMap(r, root, root.Mark(), "", kTopKeys)) return r.status();
  ReadTopLevel(r, root, base, config);
  ForEachItem(r, root, "", "jobs", "job specs", [&](const YAML::Node& item, const std::string& path) {
    JobSpec spec;
    ParseJobNode(r, item, item.Mark(), path, base, &spec);
    AddJob(r, item, item.Mark(), path, std::move(spec), names, config);
  });
  return r.status();
}

absl::Status LoadJobFile(const fs::path& file, JobNames* names, DaemonConfig* config) {
  const absl::StatusOr<std::string> text = ReadFile(file);
  if (!text.ok()) return text.status();
  YAML::Node node;
  JobSpec spec;
  if (absl::Status s = ParseJobDocument(*text, file.string(), file.parent_path(), &node, &spec); !s.ok()) {
    return s;
  }
  Reader r(file.string());
  AddJob(r, node, node.Mark(), "", std::move(spec), names, config);
  return r.status();
}

// Loads the *.yaml and *.yml files of `config->jobs_dir` in file name order.
absl::Status LoadJobsDir(JobNames* names, DaemonConfig* config) {
  if (config->jobs_dir.empty()) return absl::OkStatus();
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(config->jobs_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path extension = it->path().extension();
    std::error_code entry_ec;
    if ((extension == ".yaml" || extension == ".yml") && !it->is_directory(entry_ec)) {
      files.push_back(it->path());
    }
  }
  if (ec) return absl::ErrnoToStatus(ec.value(), StrCat(config->jobs_dir.string(), ": cannot list"));
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    absl::Status status = CatchYaml(file.string(), [&] { return LoadJobFile(file, names, config); });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonConfig> LoadDaemonConfig(const fs::path& path) {
  DaemonConfig config;
  std::error_code ec;
  config.config_path = fs::absolute(path, ec).lexically_normal();
  if (ec) config.config_path = path;
  const absl::StatusOr<std::string> text = ReadFile(config.config_path);
  if (!text.ok()) return text.status();
  JobNames names;
  absl::Status status =
      CatchYaml(config.config_path.string(), [&] { return ParseDaemonDocument(*text, &names, &config); });
  if (status.ok()) status = LoadJobsDir(&names, &config);
  if (!status.ok()) return status;
  return config;
}

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& source,
                                     const fs::path& base_dir) {
  JobSpec spec;
  YAML::Node node;
  const absl::Status status =
      CatchYaml(source, [&] { return ParseJobDocument(yaml_text, source, base_dir, &node, &spec); });
  if (!status.ok()) return status;
  return spec;
}

absl::Status ValidateJobSpec(const JobSpec& spec) {
  const MaybeViolation violation = FindViolation(spec);
  if (!violation) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(violation->key, ": ", violation->reason));
}

const char* CheckpointLayoutName(CheckpointLayout layout) {
  for (const auto& [value, name] : kLayoutNames) {
    if (value == layout) return name;
  }
  return "unknown";
}

std::optional<CheckpointLayout> ParseCheckpointLayout(const std::string& name) {
  for (const auto& [value, layout_name] : kLayoutNames) {
    if (name == layout_name) return value;
  }
  return std::nullopt;
}

}  // namespace tpud
