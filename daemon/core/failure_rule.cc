#include "daemon/core/failure_rule.h"

#include <array>
#include <utility>

namespace tpud {
namespace {

constexpr std::array<std::pair<FailureClass, const char*>, 11> kClassNames = {{
    {FailureClass::kDeadlineExceeded, "deadline_exceeded"},
    {FailureClass::kConnection, "connection"},
    {FailureClass::kPreemption, "preemption"},
    {FailureClass::kDeviceBusy, "device_busy"},
    {FailureClass::kCrash, "crash"},
    {FailureClass::kHang, "hang"},
    {FailureClass::kHbmOom, "hbm_oom"},
    {FailureClass::kUserError, "user_error"},
    {FailureClass::kHardware, "hardware"},
    {FailureClass::kCpuFallback, "cpu_fallback"},
    {FailureClass::kUnknown, "unknown"},
}};

constexpr std::array<std::pair<RecoveryAction, const char*>, 4> kActionNames = {{
    {RecoveryAction::kRestart, "restart"},
    {RecoveryAction::kResetAndRestart, "reset_and_restart"},
    {RecoveryAction::kWaitAndRestart, "wait_and_restart"},
    {RecoveryAction::kFail, "fail"},
}};

template <typename Enum, std::size_t N>
const char* NameOf(const std::array<std::pair<Enum, const char*>, N>& table, Enum value) {
  for (const auto& [candidate, name] : table) {
    if (candidate == value) return name;
  }
  return "invalid";  // Only for a value cast from an out-of-range integer.
}

template <typename Enum, std::size_t N>
std::optional<Enum> ParseName(const std::array<std::pair<Enum, const char*>, N>& table,
                              std::string_view name) {
  for (const auto& [value, candidate] : table) {
    if (name == candidate) return value;
  }
  return std::nullopt;
}

}  // namespace

const char* FailureClassName(FailureClass failure_class) {
  return NameOf(kClassNames, failure_class);
}

std::optional<FailureClass> ParseFailureClass(std::string_view name) {
  return ParseName(kClassNames, name);
}

const char* RecoveryActionName(RecoveryAction action) { return NameOf(kActionNames, action); }

std::optional<RecoveryAction> ParseRecoveryAction(std::string_view name) {
  return ParseName(kActionNames, name);
}

}  // namespace tpud
