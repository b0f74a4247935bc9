#include "daemon/core/launch_spec.h"

#include "absl/strings/match.h"

namespace tpud {

bool IsInheritedVariable(absl::string_view name) {
  for (absl::string_view exact : {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM"}) {
    if (name == exact) return true;
  }
  for (absl::string_view prefix : {"LC_", "TPU_", "XLA_", "JAX_", "LIBTPU_", "PJRT_", "TF_CPP_"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

}  // namespace tpud
