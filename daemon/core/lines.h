// Walking text that holds several lines.
#pragma once

#include <cstddef>
#include <string_view>

namespace tpud {

// Calls fn(line) for each line of `lines` ("a\nb\n": "a", "b"), without its
// '\n'; a last line without '\n' counts too.
template <typename Fn>
void ForEachLine(std::string_view lines, Fn&& fn) {
  while (!lines.empty()) {
    const std::size_t nl = lines.find('\n');
    fn(lines.substr(0, nl));
    if (nl == std::string_view::npos) return;
    lines.remove_prefix(nl + 1);
  }
}

}  // namespace tpud
