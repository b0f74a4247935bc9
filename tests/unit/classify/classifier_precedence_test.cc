// Which line and which rule decide when several match (classifier.h,
// "Precedence"): tiers, severities, the first error of a burst, lookalikes.
// Lines are real ones (sources in tests/data/real-tpu-errors.tsv) or cut
// from them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/unit/classify/classifier_test_util.h"

namespace tpud {
namespace {

using testing::ClassifyLines;
using testing::MakeClassifier;

// jax-ml/jax#22070: libtpu refuses the busy TPU at INFO, then jax falls back to the CPU.
const std::string kBusyInfo =
    "INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend 'tpu': "
    "ABORTED: The TPU is already in use by process with pid 176028. Not attempting to load "
    "libtpu.so in this process.";
const std::string kFallbackWarning =
    "WARNING:2024-06-25 00:34:55,143:jax._src.xla_bridge:940: A Google TPU may be present on this "
    "machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling back to cpu.";
// keras-team/keras#18681: what a job that fell back to the CPU may raise next.
const std::string kDevicesError =
    "ValueError: Received incompatible devices for jitted computation. Got argument state[0][0] of "
    "f with shape float32[3,3,1,12] and device ids [0, 1, 2, 3] on platform TPU";
// Lightning-AI/pytorch-lightning#14391: a retried RPC, logged as a warning.
const std::string kRetriedRpc =
    "2022-08-19 19:16:08.122420: W tensorflow/core/distributed_runtime/rpc/grpc_remote_master.cc:157] "
    "RPC failed with status = \"UNAVAILABLE: Connection reset by peer\", maybe retrying the RPC";
const std::string kBarrier =
    "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
    "multihost_broadcast_sync0. Timed out task names:";

TEST_CASE("Precedence: device busy at INFO, then the CPU fallback it causes, is device_busy",
          "[classify][precedence]") {
  const Classification verdict = ClassifyLines({kBusyInfo, kFallbackWarning, kDevicesError});
  CHECK(verdict.rule == "builtin:device_busy");
  CHECK(verdict.action == RecoveryAction::kResetAndRestart);
  CHECK(verdict.matched_line_number == 1);
}

TEST_CASE("Precedence: a CPU fallback outranks the user_error it causes, so the run is not failed",
          "[classify][precedence]") {
  const Classification verdict = ClassifyLines({kFallbackWarning, kDevicesError});
  CHECK(verdict.failure_class == FailureClass::kCpuFallback);
  CHECK(verdict.action == RecoveryAction::kRestart);
}

TEST_CASE("Precedence: a fatal line wrapping a specific message takes the specific class",
          "[classify][precedence]") {
  // pytorch/xla#7138 and pytorch/xla#4847.
  const std::string halt =
      "F0000 00:00:1716973077.466057    9049 pjrt_computation_client.cc:487] Non-OK-status: status "
      "status: INTERNAL: Program or fatal error occurred; computation may be invalid: INTERNAL: "
      "Accelerator device halted prematurely, perhaps due to an on-device check-failure.";
  const std::string oom =
      "2023-04-08 11:22:09.148143: F tensorflow/tsl/platform/statusor.cc:33] Attempting to fetch "
      "value instead of handling error RESOURCE_EXHAUSTED: Error loading program: Attempting to "
      "reserve 7.04G at the bottom of memory. That was not possible. There are 6.90G free, 0B "
      "reserved, and 6.90G reservable.";
  const std::string abort = "*** SIGABRT received by PID 13755 (TID 16714) on cpu 80 from PID 13755";
  CHECK(ClassifyLines({halt, abort}).rule == "builtin:hardware");
  CHECK(ClassifyLines({oom, abort}).rule == "builtin:hbm_oom_runtime");
  CHECK(ClassifyLines({abort, oom}).rule == "builtin:hbm_oom_runtime");  // Specific beats earlier generic.
  CHECK(ClassifyLines({abort}).rule == "builtin:crash");
}

TEST_CASE("Precedence: a vmem OOM is a kernel bug (user_error), not HBM", "[classify][precedence]") {
  const Classification verdict = ClassifyLines(
      {"RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran "
       "out of memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by "
       "16.42M"});
  CHECK(verdict.rule == "builtin:vmem_oom");
  CHECK(verdict.failure_class == FailureClass::kUserError);
}

TEST_CASE("Precedence: the gRPC driver's Deadline Exceeded means the TPU is unreachable: connection",
          "[classify][precedence]") {
  const Classification verdict = ClassifyLines(
      {"2023-02-15 17:41:46.158200: E external/org_tensorflow/tensorflow/compiler/xla/python/"
       "tpu_driver/grpc_tpu_driver.cc:1070] Failed to open the gRPC driver: 4: Deadline Exceeded: "});
  CHECK(verdict.failure_class == FailureClass::kConnection);
  CHECK(verdict.action == RecoveryAction::kRestart);
}

TEST_CASE("Precedence: UNAVAILABLE with a more specific cause takes the cause",
          "[classify][precedence]") {
  CHECK(ClassifyLines({"jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: No TPU Platform available."})
            .failure_class == FailureClass::kHardware);
  CHECK(ClassifyLines({"E0101 coordination_service.cc:1170] UNAVAILABLE: Task /job:jax_worker/replica:0/"
                       "task:0 heartbeat timeout."})
            .failure_class == FailureClass::kDeadlineExceeded);
}

TEST_CASE("Precedence: among symptoms the first error of the burst wins, over any wrapper",
          "[classify][precedence]") {
  const std::string lost = "E0410 grpc: UNAVAILABLE: failed to connect to all addresses";
  const std::string bare = "tensorflow.python.framework.errors_impl.UnavailableError: Connect Failed";
  Classification verdict = ClassifyLines({lost, kBarrier, lost});
  CHECK(verdict.rule == "builtin:connection_lost");
  CHECK(verdict.matched_line_number == 1);
  verdict = ClassifyLines({bare, kBarrier});  // A bare status is a wrapper: the barrier is specific.
  CHECK(verdict.rule == "builtin:coordination_timeout");
  CHECK(verdict.matched_line_number == 2);
}

TEST_CASE("Precedence: an error line outranks an earlier warning, which decides only alone",
          "[classify][precedence]") {
  Classification verdict = ClassifyLines({kRetriedRpc, kBarrier});
  CHECK(verdict.rule == "builtin:coordination_timeout");
  verdict = ClassifyLines({kRetriedRpc, "step=9 loss=1.0"});
  CHECK(verdict.rule == "builtin:connection_lost");
  CHECK(verdict.matched_line_number == 1);
}

TEST_CASE("Precedence: a warning never decides `fail`", "[classify][precedence]") {
  const std::string warned_oom =
      "W0501 12:00:00.000000 7 allocator.cc:12] Attempting to allocate 1.00G. That was not possible. "
      "There are 0.50G free.; (0x0x0_HBM0)";
  const Classification verdict = ClassifyLines({warned_oom});
  CHECK(verdict.rule == "exit:code 1");
  CHECK(verdict.action == RecoveryAction::kRestart);
  // Unmarked, the same words are decisive.
  CHECK(ClassifyLines({warned_oom.substr(warned_oom.find(']') + 2)}).action == RecoveryAction::kFail);
}

TEST_CASE("Precedence: TF's \"preemption of a connected worker\" is a counted connection failure",
          "[classify][precedence]") {
  const Classification verdict = ClassifyLines(
      {"INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker "
       "or parameter server. The current session will be closed and a new session will be created."});
  CHECK(verdict.failure_class == FailureClass::kConnection);
  CHECK(verdict.action == RecoveryAction::kRestart);
}

TEST_CASE("Precedence: lookalike warnings and progress notes never decide", "[classify][precedence]") {
  const std::vector<std::string> lookalikes = {
      // huggingface/diffusers#856, jax-ml/jax#14300, the TSV's maxview log, pytorch/xla#2137,
      // marin-community/marin#87, kalininalab/alphafold_non_docker#68.
      "2022-10-15 18:07:41.780474: W external/org_tensorflow/tensorflow/compiler/xla/python/tpu_driver/"
      "client/tpu_client.cc:617] TPU Execute is taking a long time. This might be due to a deadlock "
      "between multiple TPU cores or a very slow program.",
      "/usr/local/lib/python3.8/site-packages/jax/_src/lib/xla_bridge.py:180: UserWarning: TPU backend "
      "initialization is taking more than 60.0 seconds. Did you run your code on all TPU hosts?",
      "2026-04-21 08:43:41.302773: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] "
      "failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
      "I0000 00:00:1671728351.222598      12 common_lib.cc:145] Failed to fetch URL on try 1 out of 6: "
      "Timeout was reached",
      "2020-05-28 11:50:27 10.164.15.200 [1] 2020-05-28 11:50:27.058553: I    7449 tensorflow/compiler/"
      "xla/xla_client/mesh_service.cc:208] Waiting to connect to client mesh master (300 seconds) "
      "10.164.15.199:8477",
      "Quota 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' exhausted.",
      "I0820 16:10:25.293788 140208504612672 xla_bridge.py:353] Unable to initialize backend "
      "'tpu_driver': NOT_FOUND: Unable to find driver in registry given worker: ",
  };
  const auto classifier = MakeClassifier();
  for (const std::string& line : lookalikes) {
    INFO(line);
    CHECK(ClassifyLines({line}, classifier).rule == "exit:code 1");
  }
  std::vector<std::string> burst = lookalikes;
  burst.push_back(kBarrier);
  CHECK(ClassifyLines(burst, classifier).rule == "builtin:coordination_timeout");
}

TEST_CASE("Precedence: a user rule beats every built-in rule, at any severity",
          "[classify][precedence]") {
  const auto classifier = MakeClassifier(
      {{"Retrying \\(\\d+/\\d+\\)", FailureClass::kConnection, RecoveryAction::kFail, "wrong master"}});
  const Classification verdict = ClassifyLines(
      {"E0501 client.cc:1] Check failed: ok", "WARNING:tensorflow:Retrying (5/288)."}, classifier);
  CHECK(verdict.rule == "user:0");
  CHECK(verdict.action == RecoveryAction::kFail);
  CHECK(verdict.matched_line_number == 2);
}

}  // namespace
}  // namespace tpud
