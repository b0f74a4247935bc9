// The yaml-cpp adapter for config files: the only header that includes
// yaml-cpp. Reading keeps the first error as "FILE:LINE: KEY.PATH: reason".
// Internal to daemon/config.
#pragma once

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tpud::config_internal {

using Keys = std::span<const absl::string_view>;

// "a.b" from path "a" and key "b"; "b" from an empty path.
std::string Join(absl::string_view path, absl::string_view key);
int LineOf(const YAML::Mark& mark);
// `path` made absolute against `base` (unchanged when empty or absolute).
std::filesystem::path Resolve(const std::filesystem::path& base, const std::filesystem::path& path);
// How a value reads in an error: a scalar quoted, anything else by its kind.
std::string Describe(const YAML::Node& node);

// Keeps the first error met while reading one YAML document from `source`.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  const std::string& source() const { return source_; }
  std::string Where(const YAML::Mark& mark) const { return absl::StrCat(source_, ":", LineOf(mark)); }
  // Records "SOURCE:LINE: KEY: reason" unless an error is already recorded.
  void Fail(const YAML::Mark& mark, absl::string_view key, absl::string_view reason);

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
Entry Find(const YAML::Node& map, absl::string_view key);

// Where `key_path` ("restart.max_restarts", "command[0]") is written under
// `node` (itself at `mark`); the nearest written ancestor when it is absent.
YAML::Mark MarkOf(YAML::Node node, YAML::Mark mark, absl::string_view key_path);

// "unknown key, did you mean restart? (known: name, command, ...)".
std::string UnknownKeyReason(absl::string_view key, Keys known);

// Checks that `node` (at `mark`) is a mapping of distinct keys, each in `known`
// unless `known` is empty. Null counts as an empty mapping.
bool ExpectMap(Reader& r, const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
               Keys known);

// The mapping at `key` of `parent` once checked against `known`; nullopt when absent or bad.
std::optional<YAML::Node> Section(Reader& r, const YAML::Node& parent, const std::string& path,
                                  absl::string_view key, Keys known);

inline const char* Expected(const std::string*) { return "a string"; }
inline const char* Expected(const std::filesystem::path*) { return "a path"; }
inline const char* Expected(const int*) { return "an integer"; }
inline const char* Expected(const double*) { return "a number"; }
inline const char* Expected(const bool*) { return "true or false"; }
template <typename Text>  // std::string or fs::path: numbers and booleans are taken as their text.
bool Decode(const YAML::Node& node, Text* out) {
  *out = node.Scalar();
  return true;
}
inline bool Decode(const YAML::Node& node, int* out) { return absl::SimpleAtoi(node.Scalar(), out); }
inline bool Decode(const YAML::Node& node, double* out) { return absl::SimpleAtod(node.Scalar(), out); }
inline bool Decode(const YAML::Node& node, bool* out) { return YAML::convert<bool>::decode(node, *out); }

// Reads the scalar at `key` of `map` into `*out`; leaves the default when absent.
template <typename T>
void Read(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key, T* out) {
  const Entry entry = Find(map, key);
  if (!r.ok() || !entry.found) return;
  T value{};
  if (!entry.value.IsScalar() || !Decode(entry.value, &value)) {
    return r.Fail(entry.mark, Join(path, key),
                  absl::StrCat("expected ", Expected(out), ", got ", Describe(entry.value)));
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
    r.Fail(entry.mark, where, absl::StrCat("expected a list of ", what, ", got ", Describe(entry.value)));
  }
  for (size_t i = 0; r.ok() && entry.value.IsSequence() && i < entry.value.size(); ++i) {
    visit(entry.value[i], absl::StrCat(where, "[", i, "]"));
  }
  return r.ok();
}

void ReadStrings(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key,
                 std::vector<std::string>* out);

// 52428800, "50MB", "512KB", "10MiB", "1GiB": KB..TB are powers of 1000, KiB..TiB of 1024.
std::optional<std::uint64_t> ParseSize(const std::string& text);
void ReadSize(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key,
              std::uint64_t* out);

// Parses `text` into its one YAML document (null when the text is empty).
absl::Status LoadDocument(const std::string& text, const std::string& source, YAML::Node* out);

// Runs `parse`, turning a stray yaml-cpp exception into an error naming `source`.
template <typename Parse>
absl::Status CatchYaml(const std::string& source, Parse parse) {
  try {
    return parse();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", LineOf(e.mark), ": ", e.msg));
  }
}

}  // namespace tpud::config_internal
