#include "daemon/config/socket_access.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/unix_groups.h"

namespace tpud::config_internal {

std::optional<std::uint32_t> ParseFileMode(const std::string& text) {
  absl::string_view digits = text;
  if (absl::StartsWith(digits, "0o") || absl::StartsWith(digits, "0O")) digits.remove_prefix(2);
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  std::uint32_t mode = 0;
  for (const char c : digits) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  }
  if (mode > 0777) return std::nullopt;
  return mode;
}

void ReadSocketAccess(Reader& r, const YAML::Node& root, DaemonConfig* config) {
  Read(r, root, "", "socket_group", &config->socket_group);
  if (r.ok() && !config->socket_group.empty()) {  // Empty: the daemon's own group.
    if (absl::StatusOr<gid_t> gid = LookUpGroup(config->socket_group); !gid.ok()) {
      return r.Fail(Find(root, "socket_group").mark, "socket_group", gid.status().message());
    }
  }
  const Entry entry = Find(root, "socket_mode");
  std::string mode_text;
  Read(r, root, "", "socket_mode", &mode_text);
  if (!r.ok() || !entry.found) return;
  const std::optional<std::uint32_t> mode = ParseFileMode(mode_text);
  if (!mode) {
    return r.Fail(entry.mark, "socket_mode",
                  absl::StrCat("expected octal permission bits such as 0660, got \"", mode_text, "\""));
  }
  if ((*mode & 0600) != 0600) {
    return r.Fail(entry.mark, "socket_mode",
                  absl::StrCat("must give the owner read and write (0600), got \"", mode_text, "\""));
  }
  config->socket_mode = *mode;
}

}  // namespace tpud::config_internal
