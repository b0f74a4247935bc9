// libFuzzer target: everything tpud reads from a shim or its attempt
// directory (frames' payloads, exit.json, state.json, spec.json, the ready
// report). A corrupt or hostile file must give an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/process/log_file.h"
#include "daemon/shim/wire/attempt_dir.h"
#include "daemon/shim/wire/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (size >= tpud::shim::kFrameHeaderBytes) (void)tpud::shim::DecodeFrameLength(text.data());
  (void)tpud::shim::DecodeUint64(text);
  (void)tpud::shim::DecodeInt32(text);
  int pid = 0;
  (void)tpud::shim::ExitStatusFromJson(text, &pid);
  (void)tpud::shim::LogHealthFromJson(text);
  (void)tpud::shim::ParseReadyReport(text);
  (void)tpud::shim::ParseStateJson(text, "state.json");
  absl::StatusOr<tpud::LaunchSpec> spec = tpud::shim::ParseSpecJson(text, "spec.json");
  if (spec.ok()) {
    absl::StatusOr<std::string> again = tpud::shim::SpecToJson(*spec);  // Round trip.
    if (again.ok() && !tpud::shim::ParseSpecJson(*again, "again").ok()) __builtin_trap();
  }
  // Output frames are split into lines by the daemon.
  tpud::LineSplitter splitter(256);
  std::size_t bytes = 0;
  splitter.FeedBlocks(text, [&](std::string_view lines) { bytes += lines.size(); });
  splitter.Flush([&](std::string_view line) { bytes += line.size(); });
  return 0;
}
