// The `slice:` section of tpud.yaml (SliceConfig, daemon/core/slice_config.h).
// Internal to daemon/config (config.cc calls ReadSliceSection).
#pragma once

#include <filesystem>

#include "daemon/config/config.h"
#include "daemon/config/yaml_reader.h"

namespace tpud::config_internal {

// Reads `slice:` (absent: config->slice stays nullopt) from the top-level
// mapping `root`, resolving TLS paths against `base`, then validates it.
// Errors go to `r`, naming the file, line and key, e.g.
//   /etc/tpud/tpud.yaml:4: slice.etcd.lease_seconds: must be in 2..300, got 1
void ReadSliceSection(Reader& r, const YAML::Node& root, const std::filesystem::path& base, DaemonConfig* config);

}  // namespace tpud::config_internal
