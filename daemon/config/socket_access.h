// The `socket_group` and `socket_mode` keys of tpud.yaml: who may reach the
// control socket. Internal to daemon/config (config.cc calls ReadSocketAccess).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/config/config.h"
#include "daemon/config/yaml_reader.h"

namespace tpud::config_internal {

// Permission bits written in octal: "0660", "660", "0o660". nullopt for
// anything else, or bits outside 0777.
std::optional<std::uint32_t> ParseFileMode(const std::string& text);

// Reads socket_group (empty, or a group NSS knows, or a number) and
// socket_mode (octal, within 0777, and giving the owner read and write: 0600)
// from the top-level mapping `root` into `config`. Errors go to `r`, naming
// the file, line and key, e.g.
//   /etc/tpud/tpud.yaml:3: socket_group: no such group "tpud"
void ReadSocketAccess(Reader& r, const YAML::Node& root, DaemonConfig* config);

}  // namespace tpud::config_internal
