#include "daemon/config/yaml_reader.h"

#include <re2/re2.h>

#include <algorithm>
#include <sstream>
#include <cctype>
#include <utility>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/core/text.h"
#include "daemon/core/limits.h"

namespace tpud::config_internal {

namespace fs = std::filesystem;
using absl::StrCat;

std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : StrCat(path, ".", key);
}

int LineOf(const YAML::Mark& mark) { return mark.is_null() ? 1 : mark.line + 1; }

fs::path Resolve(const fs::path& base, const fs::path& path) {
  return path.empty() || path.is_absolute() ? path : (base / path).lexically_normal();
}

// How a value reads in an error: a scalar quoted, anything else by its kind.
std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return StrCat("\"", Truncated(node.Scalar()), "\"");
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "null";
}

void Reader::Fail(const YAML::Mark& mark, absl::string_view key, absl::string_view reason) {
  if (!status_.ok()) return;
  // A key path can echo a key someone wrote (env.<NAME>): bounded like values.
  status_ = absl::InvalidArgumentError(key.empty() ? StrCat(Where(mark), ": ", reason)
                                                   : StrCat(Where(mark), ": ", Truncated(key), ": ", reason));
}

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

namespace {

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

}  // namespace

std::string UnknownKeyReason(absl::string_view key, Keys known) {
  std::string reason = "unknown key";
  // Suggestions only for key-sized keys: edit distance is quadratic.
  size_t best = key.size() > 64 ? 0 : std::max<size_t>(2, key.size() / 3) + 1;
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

void ReadStrings(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key,
                 std::vector<std::string>* out) {
  std::vector<std::string> items;
  std::size_t bytes = 0;  // Bounded: aliases could otherwise repeat one long string without end.
  const bool found =
      ForEachItem(r, map, path, key, "strings", [&](const YAML::Node& item, const std::string& item_path) {
        if (!item.IsScalar()) {
          return r.Fail(item.Mark(), item_path, StrCat("expected a string, got ", Describe(item)));
        }
        if ((bytes += item.Scalar().size() + 1) > kMaxExecBytes) {
          return r.Fail(item.Mark(), Join(path, key), StrCat("longer than ", kMaxExecBytes, " bytes in total"));
        }
        items.push_back(item.Scalar());
      });
  if (found) *out = std::move(items);
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

// Parses `text` into its one YAML document (null when the text is empty).
namespace {

// Counts the documents of a text without building them, remembering where
// each starts.
class DocumentStarts final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    starts.push_back(mark);
    roots.push_back(mark);  // Until its first node says where its content starts.
    root_seen = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

  std::vector<YAML::Mark> starts;  // Where each document starts ("---" or its first token).
  std::vector<YAML::Mark> roots;   // Where each document's root node is.

 private:
  void Node(const YAML::Mark& mark) {
    if (!root_seen && !roots.empty()) roots.back() = mark;
    root_seen = true;
  }
  bool root_seen = false;
};

// The line and number of the documents after the first; an error for text
// yaml-cpp cannot get past. yaml-cpp 0.7's LoadAll never returns on a ','
// outside any flow collection (the input "," alone): each HandleNextDocument
// reports a new document without consuming it. Found by tests/fuzz/fuzz_config.
absl::Status CheckOneDocument(const std::string& text, const std::string& source) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentStarts counter;
  constexpr std::size_t kMaxDocuments = 1000;
  while (counter.starts.size() < kMaxDocuments && parser.HandleNextDocument(counter)) {
    const std::size_t n = counter.starts.size();
    if (n >= 2 && counter.starts[n - 1].pos == counter.starts[n - 2].pos) {
      return absl::InvalidArgumentError(
          StrCat(source, ":", LineOf(counter.starts[n - 1]), ": invalid YAML: unexpected ',' or content"));
    }
  }
  if (counter.starts.size() > 1) {
    return absl::InvalidArgumentError(StrCat(source, ":", LineOf(counter.roots[1]),
                                             ": expected one YAML document, found ", counter.starts.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadDocument(const std::string& text, const std::string& source, YAML::Node* out) {
  try {
    if (absl::Status one = CheckOneDocument(text, source); !one.ok()) return one;
    *out = YAML::Load(text);  // Reads the first document and stops.
  } catch (const YAML::DeepRecursion& e) {
    return absl::InvalidArgumentError(StrCat(source, ":", LineOf(e.mark), ": invalid YAML: nested more than ",
                                             e.depth(), " levels deep"));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(StrCat(source, ":", LineOf(e.mark), ": invalid YAML: ", e.msg));
  }
  return absl::OkStatus();
}

}  // namespace tpud::config_internal
