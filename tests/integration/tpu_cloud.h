// The cloud side of the TPU integration tests: the GCE metadata emulator (for
// the access token) and the Cloud TPU API emulator (one node,
// projects/p/locations/z/nodes/n), and the tpud.yaml keys that point tpud's
// api backend at them.
#pragma once

#include <string>

#include "tests/support/cloud_tpu_emulator.h"
#include "tests/support/gce_metadata_emulator.h"
#include "tests/integration/harness.h"
#include "tests/integration/processes.h"

namespace tpud::testing {

inline constexpr char kTpuNode[] = "projects/p/locations/z/nodes/n";

// Emulators are children of this test process; keeps the harness's orphan
// cleanup (KillOrphans) from waiting for them.
class KeptChild {
 public:
  explicit KeptChild(int pid) : pid_(pid) { KeepChild(pid_); }
  ~KeptChild() { ReleaseChild(pid_); }
  KeptChild(const KeptChild&) = delete;
  KeptChild& operator=(const KeptChild&) = delete;

 private:
  int pid_;
};

// Thread-safety: none; the test's thread only.
struct CloudFixture {
  // `op_delay`: seconds each API operation (stop, start, reset) takes.
  explicit CloudFixture(const std::string& op_delay = "0.1")
      : tpu({"--node", kTpuNode, "--op-delay", op_delay}), keep_tpu{tpu.pid()} {}

  MetadataEmulator metadata;
  KeptChild keep_metadata{metadata.pid()};
  CloudTpuEmulator tpu;
  KeptChild keep_tpu;

  // tpud.yaml's top-level keys: the api backend at the emulator; the
  // metadata watcher off, the token still from the metadata emulator; the
  // local rung's devices and lock file inside `dir`.
  std::string DaemonYaml(const TempDir& dir) const {
    return "gce_metadata: {enabled: \"false\"}\n"
           "tpu:\n"
           "  name: n\n"
           "  project: p\n"
           "  zone: z\n"
           "  api_endpoint: " + YamlQuote(tpu.endpoint()) + "\n" +
           "  metadata_host: " + YamlQuote(metadata.host()) + "\n" +
           "  device_globs: [" + YamlQuote((dir / "dev").string() + "/accel*") + "]\n" +
           "  lock_file: " + YamlQuote((dir / "libtpu_lockfile").string()) + "\n" +
           "  reset: {backend: api, timeout_seconds: 30, poll_interval_seconds: 0.1}";
  }

  // Whether the API emulator logged a request containing `what`
  // ("POST /v2/.../nodes/n:stop 200").
  bool SawRequest(const std::string& what) const {
    for (const std::string& request : tpu.Requests()) {
      if (request.find(what) != std::string::npos) return true;
    }
    return false;
  }
};

}  // namespace tpud::testing
