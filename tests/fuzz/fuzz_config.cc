// libFuzzer target: the config and job spec loader (yaml-cpp adapter, schema,
// validation). Any input must give a spec or an error naming the source,
// never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <unistd.h>

#include "daemon/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tpud::JobSpec> spec = tpud::ParseJobSpec(text, "fuzz.yaml", "/base");
  if (spec.ok() && !tpud::ValidateJobSpec(*spec).ok()) __builtin_trap();  // Parsed specs are valid.
  // The daemon config reads a file: the same bytes as tpud.yaml.
  static const std::string path = "/tmp/tpud-fuzz-config-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  (void)tpud::LoadDaemonConfig(path);
  return 0;
}
