// The severity a real log line declares, through the prefixes jobs put in
// front of it (sources: tests/data/real-tpu-errors.tsv).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "daemon/classify/line_severity.h"

namespace tpud {
namespace {

TEST_CASE("Line severity: glog, absl, TF, Python and warnings markers behind the usual noise",
          "[classify][severity]") {
  struct Case {
    const char* line;
    LineSeverity severity;
  };
  const std::vector<Case> cases = {
      {"I0000 00:00:1649423660.053391 1924758 f236.cc:165] libtpu.so already in use", LineSeverity::kInfo},
      {"E0314 20:41:46.478280   30673 process_state.cc:770] RAW: Raising signal 6", LineSeverity::kError},
      {"F0317 02:46:21.118406 358837 tpu_hal.cc:10] Check failed: x", LineSeverity::kFatal},
      {"W0108 00:47:24.462080 4582849984 tpu_system_metadata.py:97] Failed to connect", LineSeverity::kWarning},
      {"2022-08-19 19:16:08.122420: W tensorflow/core/distributed_runtime/rpc/grpc_remote_master.cc:157] "
       "RPC failed",
       LineSeverity::kWarning},
      {"2020-05-28 11:50:27 10.164.15.200 [1] 2020-05-28 11:50:27.058553: I    7449 tensorflow/compiler/"
       "xla/xla_client/mesh_service.cc:208] Waiting to connect",
       LineSeverity::kInfo},
      {" 50%|█████     | 1/2 [00:01<00:01,  1.21s/it]F0000 00:00:1716973077.466057    9049 "
       "pjrt_computation_client.cc:487] Non-OK-status",
       LineSeverity::kFatal},
      {"WARNING:absl:No GPU/TPU found, falling back to CPU.", LineSeverity::kWarning},
      {"INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend 'tpu'",
       LineSeverity::kInfo},
      {"ERROR: Tensorflow error: Status: Socket closed", LineSeverity::kError},
      {"2022-11-30 12:50:08,211 - jax._src.lib.xla_bridge - WARNING - No GPU/TPU found", LineSeverity::kWarning},
      {"/home/u/jax/lib/xla_bridge.py:130: UserWarning: No GPU/TPU found, falling back to CPU.",
       LineSeverity::kWarning},
      {"(Worker pid=812, ip=10.0.0.2) E0501 12:00:00.000000 812 client.cc:1] lost", LineSeverity::kError},
      {"[rank0]: CRITICAL: out of patience", LineSeverity::kFatal},
      {"stderr: DEBUG: probing", LineSeverity::kDebug},
      {"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer",
       LineSeverity::kUnmarked},
      {"  (1) Unavailable: {{function_node __inference_train_function_133151}} failed to connect",
       LineSeverity::kUnmarked},
      {"Exception in device=TPU:6: tensorflow/compiler/xla/xla_client/mesh_service.cc:331 : Failed",
       LineSeverity::kUnmarked},
      {"E1001: CompileTimeScopedVmemOom:", LineSeverity::kUnmarked},
      {"", LineSeverity::kUnmarked},
  };
  for (const Case& c : cases) {
    INFO(c.line);
    CHECK(std::string(LineSeverityName(ParseLineSeverity(c.line))) == LineSeverityName(c.severity));
  }
}

TEST_CASE("Line severity: only unmarked, error and fatal lines report an error", "[classify][severity]") {
  CHECK(IsErrorSeverity(LineSeverity::kUnmarked));
  CHECK(IsErrorSeverity(LineSeverity::kError));
  CHECK(IsErrorSeverity(LineSeverity::kFatal));
  CHECK_FALSE(IsErrorSeverity(LineSeverity::kWarning));
  CHECK_FALSE(IsErrorSeverity(LineSeverity::kInfo));
  CHECK_FALSE(IsErrorSeverity(LineSeverity::kDebug));
}

}  // namespace
}  // namespace tpud
