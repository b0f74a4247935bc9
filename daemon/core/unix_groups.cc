#include "daemon/core/unix_groups.h"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tpud {
namespace {

// Calls `lookup(&group, buffer, size, &result)` (a getgr*_r), growing the
// buffer on ERANGE. Returns the errno; `*found` is null when there is no entry.
template <typename Lookup>
int CallGroupLookup(Lookup lookup, group* entry, std::vector<char>* buffer, group** found) {
  const long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  buffer->resize(hint > 0 ? static_cast<std::size_t>(hint) : 4096);
  while (true) {
    const int error = lookup(entry, buffer->data(), buffer->size(), found);
    if (error != ERANGE || buffer->size() >= (1u << 24)) return error;
    buffer->resize(buffer->size() * 2);
  }
}

}  // namespace

absl::StatusOr<gid_t> LookUpGroup(const std::string& name_or_number) {
  std::uint32_t number = 0;
  if (absl::SimpleAtoi(name_or_number, &number)) return static_cast<gid_t>(number);
  if (name_or_number.empty()) return absl::InvalidArgumentError("no such group \"\"");
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer;
  const int error =
      CallGroupLookup([&](group* g, char* buf, std::size_t size,
                          group** out) { return ::getgrnam_r(name_or_number.c_str(), g, buf, size, out); },
                      &entry, &buffer, &found);
  if (found != nullptr) return found->gr_gid;
  if (error == 0 || error == ENOENT || error == ESRCH || error == EBADF || error == EPERM) {
    return absl::InvalidArgumentError(absl::StrCat("no such group \"", name_or_number, "\""));
  }
  return absl::ErrnoToStatus(error, absl::StrCat("group \"", name_or_number, "\": lookup failed"));
}

std::string GroupName(gid_t gid) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer;
  CallGroupLookup([&](group* g, char* buf, std::size_t size,
                      group** out) { return ::getgrgid_r(gid, g, buf, size, out); },
                  &entry, &buffer, &found);
  return found != nullptr ? std::string(found->gr_name) : std::to_string(gid);
}

}  // namespace tpud
