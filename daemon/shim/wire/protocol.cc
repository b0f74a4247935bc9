#include "daemon/shim/wire/protocol.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/shim/wire/json_fields.h"

namespace tpud::shim {
namespace {

using nlohmann::json;

template <typename T>
std::string EncodeLittleEndian(T value) {
  std::string out(sizeof(T), '\0');
  auto bits = static_cast<std::make_unsigned_t<T>>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<char>((bits >> (8 * i)) & 0xff);
  return out;
}

template <typename T>
std::optional<T> DecodeLittleEndian(std::string_view payload) {
  if (payload.size() != sizeof(T)) return std::nullopt;
  std::make_unsigned_t<T> bits = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    bits |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(payload[i])) << (8 * i);
  }
  return static_cast<T>(bits);
}

// The last line of `report` that is a JSON object, if any.
std::optional<json> LastJsonLine(std::string_view report) {
  while (!report.empty()) {
    if (report.back() == '\n') report.remove_suffix(1);
    const std::size_t start = report.rfind('\n');
    const std::string_view line =
        start == std::string_view::npos ? report : report.substr(start + 1);
    json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) return parsed;
    report = start == std::string_view::npos ? std::string_view() : report.substr(0, start + 1);
  }
  return std::nullopt;
}

}  // namespace

std::string EncodeFrame(FrameType type, std::string_view payload) {
  std::string frame(1, static_cast<char>(type));
  frame += EncodeLittleEndian(static_cast<std::uint32_t>(payload.size()));
  frame.append(payload);
  return frame;
}

std::uint32_t DecodeFrameLength(const char* header) {
  return *DecodeLittleEndian<std::uint32_t>(std::string_view(header + 1, 4));
}

std::string EncodeUint64(std::uint64_t value) { return EncodeLittleEndian(value); }
std::string EncodeInt32(std::int32_t value) { return EncodeLittleEndian(value); }
std::optional<std::uint64_t> DecodeUint64(std::string_view payload) {
  return DecodeLittleEndian<std::uint64_t>(payload);
}
std::optional<std::int32_t> DecodeInt32(std::string_view payload) {
  return DecodeLittleEndian<std::int32_t>(payload);
}

std::string ExitStatusToJson(const ExitStatus& status, int trainer_pid) {
  return json{{"code", status.code},
              {"signal", status.signal},
              {"core_dumped", status.core_dumped},
              {"spawn_error", status.spawn_error},
              {"trainer_pid", trainer_pid}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<ExitStatus> ExitStatusFromJson(std::string_view text, int* trainer_pid) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    if (parsed.is_object() && parsed.contains("code")) {
      ExitStatus status;
      status.code = IntField<int>(parsed, "code");
      status.signal = IntField<int>(parsed, "signal", 0);
      status.core_dumped = parsed.value("core_dumped", false);
      status.spawn_error = parsed.value("spawn_error", std::string());
      if (trainer_pid != nullptr) *trainer_pid = IntField<int>(parsed, "trainer_pid", -1);
      return status;
    }
  } catch (const std::exception&) {  // json::exception, or IntField's invalid_argument.
    // Reported below.
  }
  return absl::InvalidArgumentError(
      absl::StrCat("not an exit status: ", std::string(text.substr(0, 200))));
}

std::string LogHealthToJson(const LogHealth& health) {
  return json{{"dropped_bytes", health.dropped_bytes}, {"dropping", health.dropping}}.dump();
}

absl::StatusOr<LogHealth> LogHealthFromJson(std::string_view text) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    if (parsed.is_object()) {
      return LogHealth{IntField<std::uint64_t>(parsed, "dropped_bytes"), parsed.value("dropping", false)};
    }
  } catch (const std::exception&) {  // json::exception, or IntField's invalid_argument.
    // Reported below.
  }
  return absl::InvalidArgumentError(absl::StrCat("not a log health report: ", std::string(text.substr(0, 200))));
}

std::string EncodeReady(const ShimReady& ready) {
  return json{{"ready", {{"shim_pid", ready.shim_pid}, {"trainer_pid", ready.trainer_pid}}}}
             .dump() +
         "\n";
}

std::string EncodeReadyError(const absl::Status& error) {
  return json{{"error",
               {{"code", static_cast<int>(error.code())},
                {"message", std::string(error.message())}}}}
             .dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

absl::StatusOr<ShimReady> ParseReadyReport(std::string_view report) {
  try {
    const std::optional<json> line = LastJsonLine(report);
    if (line && line->contains("ready")) {
      const json& ready = line->at("ready");
      ShimReady parsed{IntField<int>(ready, "shim_pid", -1), IntField<int>(ready, "trainer_pid", -1)};
      if (parsed.trainer_pid > 0) return parsed;
    }
    if (line && line->contains("error")) {
      const json& error = line->at("error");
      int code = IntField<int>(error, "code", 0);
      if (code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
        code = static_cast<int>(absl::StatusCode::kInternal);  // Never "OK" with an error.
      }
      return absl::Status(static_cast<absl::StatusCode>(code),
                          error.value("message", std::string("tpud-shim: unknown error")));
    }
  } catch (const std::exception&) {  // json::exception, or IntField's invalid_argument.
    // A malformed report is reported below, with its text.
  }
  return absl::InternalError(
      absl::StrCat("tpud-shim reported nothing: ", std::string(report.substr(0, 2000))));
}

}  // namespace tpud::shim
