// Echoing values people sent back to them, safely: bounded in length.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tpud {

// How much of a value an error message repeats.
inline constexpr std::size_t kMaxEchoedBytes = 200;

// `value` when it has at most `max_bytes` bytes; otherwise its first bytes,
// cut at a UTF-8 character boundary, then "... (N bytes)". Error messages use
// it for anything a person or a request supplied: a 10 MB job name must not
// make a 10 MB error (nor one gRPC refuses to send as trailing metadata).
inline std::string Truncated(absl::string_view value, std::size_t max_bytes = kMaxEchoedBytes) {
  if (value.size() <= max_bytes) return std::string(value);
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // A continuation byte.
  return absl::StrCat(value.substr(0, cut), "... (", value.size(), " bytes)");
}

}  // namespace tpud
