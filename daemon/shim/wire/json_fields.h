// Reading the numbers in the shim's JSON files and frames without undefined
// behaviour: nlohmann::json converts a double, or an integer out of range, to
// an integer type by a plain cast (UB for 1e100 into uint32_t; found by
// tests/fuzz/fuzz_shim_protocol). These accept integers within the type's
// range only.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpud::shim {

// `value` as T when it is an integer within T's range; nullopt otherwise.
template <typename T>
std::optional<T> AsInt(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const std::uint64_t v = value.get<std::uint64_t>();
    if (v <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(v);
  } else if (value.is_number_integer()) {
    const std::int64_t v = value.get<std::int64_t>();
    if constexpr (std::numeric_limits<T>::is_signed) {
      if (v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
          v <= static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
        return static_cast<T>(v);
      }
    } else if (v >= 0 && static_cast<std::uint64_t>(v) <= std::numeric_limits<T>::max()) {
      return static_cast<T>(v);
    }
  }
  return std::nullopt;
}

// Field `key` of `object` as T; `fallback` when absent. Throws
// std::invalid_argument naming the key when it is present but not an integer
// within T's range, or absent without a fallback.
template <typename T>
T IntField(const nlohmann::json& object, const char* key, std::optional<T> fallback = std::nullopt) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (fallback) return *fallback;
    throw std::invalid_argument(std::string(key) + ": missing");
  }
  if (const std::optional<T> v = AsInt<T>(*it)) return *v;
  throw std::invalid_argument(std::string(key) + ": not an integer in range");
}

// Field `key` as a list of T (empty when absent); throws as IntField.
template <typename T>
std::vector<T> IntListField(const nlohmann::json& object, const char* key) {
  std::vector<T> out;
  const auto it = object.find(key);
  if (it == object.end()) return out;
  if (!it->is_array()) throw std::invalid_argument(std::string(key) + ": not a list");
  for (const nlohmann::json& item : *it) {
    const std::optional<T> v = AsInt<T>(item);
    if (!v) throw std::invalid_argument(std::string(key) + ": not a list of integers in range");
    out.push_back(*v);
  }
  return out;
}

}  // namespace tpud::shim
