// The pure logic of tpud-shim: its output buffer and its wire protocol.
#include <catch2/catch.hpp>

#include "daemon/shim/wire/attempt_dir.h"
#include "daemon/shim/output_buffer.h"
#include "daemon/shim/wire/protocol.h"

namespace tpud::shim {
namespace {

TEST_CASE("Shim output buffer: bytes come out in order, in bounded pieces", "[shim]") {
  OutputBuffer buffer(100);
  buffer.Append("one\n");
  buffer.Append("two\n");
  CHECK(buffer.Take(5) == "one\nt");
  CHECK(buffer.Take(100) == "wo\n");
  CHECK(buffer.empty());
  CHECK_FALSE(buffer.TakeGap().has_value());
}

TEST_CASE("Shim output buffer: when full, new output becomes a gap, in place, whole lines resume",
          "[shim]") {
  OutputBuffer buffer(8);
  buffer.Append("abcd");                      // A line still open...
  buffer.Append("efghij");                    // ...does not fit: dropped, mid-line.
  buffer.Append("kl\nmn\n");                  // The rest of that line is skipped too; "mn" fits.
  CHECK_FALSE(buffer.TakeGap().has_value());  // The bytes before the gap come first.
  CHECK(buffer.Take(100) == "abcd");
  CHECK(buffer.Take(100).empty());  // Then the gap, reported once.
  CHECK(buffer.TakeGap() == 6u + 3u);
  CHECK_FALSE(buffer.TakeGap().has_value());
  CHECK(buffer.Take(100) == "mn\n");

  buffer.Append("1234567\n");  // Fills the buffer exactly.
  buffer.Append("x\n");        // Dropped whole: it ends a line, so nothing else is skipped...
  buffer.Append("y\n");        // ...and this one only because the buffer is still full.
  CHECK(buffer.Take(100) == "1234567\n");
  CHECK(buffer.TakeGap() == 4u);
  buffer.Append("z\n");
  CHECK(buffer.Take(100) == "z\n");
  CHECK(buffer.dropped_total() == 13);
  CHECK(buffer.empty());
}

TEST_CASE("Shim output buffer: bytes lost with a broken connection resync at a line start",
          "[shim]") {
  OutputBuffer buffer(100);
  buffer.Append("ab\ncd\nef");
  buffer.Disconnected(buffer.Take(4), false);  // "ab\nc": cut inside "cd", so "d\n" goes too.
  CHECK(buffer.TakeGap() == 4u + 2u);
  CHECK(buffer.Take(100) == "ef");

  buffer.Append("gh\nij\n");
  buffer.Disconnected(buffer.Take(3), false);  // "gh\n": a whole line, nothing else skipped.
  CHECK(buffer.TakeGap() == 3u);
  CHECK(buffer.Take(100) == "ij\n");

  buffer.Append("jk");
  buffer.Disconnected(buffer.Take(100), false);  // Its line goes on in output not read yet.
  buffer.Append("l\nm\n");
  CHECK(buffer.TakeGap() == 2u + 2u);
  CHECK(buffer.Take(100) == "m\n");
}

TEST_CASE("Shim output buffer: bytes lost just before a gap merge into it", "[shim]") {
  OutputBuffer buffer(6);
  buffer.Append("abcde");
  buffer.Append("fg\n");  // Does not fit: a gap that ends a line.
  const std::string sending = buffer.Take(100);
  buffer.Append("hi\n");
  buffer.Disconnected(sending, false);  // "abcde" is lost; behind the gap "hi" starts a line.
  CHECK(buffer.TakeGap() == 5u + 3u);
  CHECK(buffer.Take(100) == "hi\n");
}

TEST_CASE("Shim output buffer: a line the last daemon got only the head of is skipped", "[shim]") {
  OutputBuffer buffer(100);
  buffer.Append("ab");
  CHECK(buffer.Take(100) == "ab");  // Delivered, then the daemon went away.
  buffer.Append("c\nd\n");
  buffer.Disconnected("", /*delivered_mid_line=*/true);
  CHECK(buffer.TakeGap() == 2u);  // "c\n": the tail of a line the new daemon never saw begin.
  CHECK(buffer.Take(100) == "d\n");

  buffer.Append("e\n");
  buffer.Disconnected("", /*delivered_mid_line=*/false);  // Nothing cut: no gap.
  CHECK_FALSE(buffer.TakeGap().has_value());
  CHECK(buffer.Take(100) == "e\n");
}

TEST_CASE("Shim protocol: frames carry their type and length", "[shim]") {
  const std::string frame = EncodeFrame(FrameType::kOutput, "hello");
  REQUIRE(frame.size() == kFrameHeaderBytes + 5);
  CHECK(frame[0] == 'O');
  CHECK(DecodeFrameLength(frame.data()) == 5);
  CHECK(frame.substr(kFrameHeaderBytes) == "hello");
  CHECK(DecodeInt32(EncodeInt32(-15)) == -15);
  CHECK(DecodeUint64(EncodeUint64(1ull << 40)) == (1ull << 40));
  CHECK_FALSE(DecodeInt32("abc").has_value());
}

TEST_CASE("Shim protocol: the exit status round-trips through JSON", "[shim]") {
  ExitStatus killed;
  killed.signal = 9;
  killed.core_dumped = true;
  int pid = 0;
  absl::StatusOr<ExitStatus> parsed = ExitStatusFromJson(ExitStatusToJson(killed, 42), &pid);
  REQUIRE(parsed.ok());
  CHECK(parsed->Describe() == "killed by SIGKILL (core dumped)");
  CHECK(pid == 42);
  CHECK(ExitStatusFromJson("{\"code\":\"x\"}").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Shim protocol: the ready report is the last JSON line, errors keep code and message",
          "[shim]") {
  absl::StatusOr<ShimReady> ready =
      ParseReadyReport("some noise\n{\"ready\":{\"shim_pid\":10,\"trainer_pid\":11}}\n");
  REQUIRE(ready.ok());
  CHECK(ready->trainer_pid == 11);

  const absl::Status spawn_error =
      absl::NotFoundError("spawn \"/no/such\": No such file or directory");
  absl::StatusOr<ShimReady> failed = ParseReadyReport(EncodeReadyError(spawn_error));
  CHECK(failed.status() == spawn_error);

  absl::StatusOr<ShimReady> crashed = ParseReadyReport("terminate called after throwing\n");
  CHECK(crashed.status().code() == absl::StatusCode::kInternal);
  CHECK(std::string(crashed.status().message()).find("terminate called") != std::string::npos);
  // An "error" claiming code 0 (OK) must still be an error.
  CHECK_FALSE(ParseReadyReport("{\"error\":{\"code\":0,\"message\":\"m\"}}").ok());
}

}  // namespace
}  // namespace tpud::shim

namespace tpud::shim {
namespace {

TEST_CASE("Shim files: numbers out of range or not integers are errors, never a cast", "[shim]") {
  // Found by tests/fuzz/fuzz_shim_protocol: 3e33 as a supplementary group id.
  CHECK_FALSE(ParseSpecJson(R"({"argv":["/bin/true"],"working_dir":"/","log_path":"/l",)"
                            R"("run_as":{"uid":1,"gid":1,"groups":[3e33]}})", "spec.json").ok());
  CHECK_FALSE(ParseSpecJson(R"({"argv":["/bin/true"],"working_dir":"/","log_path":"/l","attempt":1e300})",
                            "spec.json").ok());
  CHECK_FALSE(ParseStateJson(R"({"trainer_pid":-5e20})", "state.json").ok());
  CHECK_FALSE(ExitStatusFromJson(R"({"code":1.5})").ok());
  CHECK_FALSE(LogHealthFromJson(R"({"dropped_bytes":-1})").ok());
  CHECK_FALSE(LogHealthFromJson(R"({"dropped_bytes":1,"dropping":"yes"})").ok());
  absl::StatusOr<ShimState> state = ParseStateJson(R"({"trainer_pid":42,"trainer_start_ticks":18446744073709551615})", "s");
  REQUIRE(state.ok());
  CHECK(state->trainer_start_ticks == 18446744073709551615ull);
}

}  // namespace
}  // namespace tpud::shim
