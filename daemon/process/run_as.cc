#include "daemon/process/run_as.h"

#include <grp.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/unix_groups.h"

namespace tpud {
namespace {

struct Passwd {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string home;
};

// nullopt: no such entry. Errors: NSS failures.
absl::StatusOr<std::optional<Passwd>> FindPasswd(const std::string& user) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  uid_t uid = 0;
  const bool numeric = absl::SimpleAtoi(user, &uid);
  const int err = numeric ? ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found)
                          : ::getpwnam_r(user.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (err != 0 && err != ENOENT && err != ESRCH) {
    return absl::UnavailableError(absl::StrCat("user \"", user, "\": ", std::strerror(err)));
  }
  if (found == nullptr) return std::optional<Passwd>();
  return std::optional<Passwd>(Passwd{found->pw_uid, found->pw_gid, found->pw_name, found->pw_dir});
}

std::vector<std::uint32_t> GroupsOf(const std::string& name, gid_t gid) {
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (::getgrouplist(name.c_str(), gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    if (::getgrouplist(name.c_str(), gid, groups.data(), &count) < 0) return {gid};
  }
  groups.resize(static_cast<std::size_t>(count));
  return std::vector<std::uint32_t>(groups.begin(), groups.end());
}

}  // namespace

absl::StatusOr<uid_t> LookUpUid(const std::string& user) {
  absl::StatusOr<std::optional<Passwd>> entry = FindPasswd(user);
  if (!entry.ok()) return entry.status();
  if (*entry) return (*entry)->uid;
  uid_t uid = 0;
  if (absl::SimpleAtoi(user, &uid)) return uid;  // A uid nobody named: taken as is.
  return absl::NotFoundError(absl::StrCat("no such user \"", user, "\""));
}

std::string UserName(uid_t uid) {
  absl::StatusOr<std::optional<Passwd>> entry = FindPasswd(std::to_string(uid));
  if (entry.ok() && *entry) return (*entry)->name;
  return std::to_string(uid);
}

absl::StatusOr<std::optional<RunAs>> ResolveRunAs(const std::string& user, const std::string& group) {
  if (user.empty() && group.empty()) return std::optional<RunAs>();
  RunAs who;
  who.uid = ::getuid();
  who.gid = ::getgid();
  who.user = UserName(::getuid());
  who.home = "/";
  if (!user.empty()) {
    absl::StatusOr<std::optional<Passwd>> entry = FindPasswd(user);
    if (!entry.ok()) return entry.status();
    if (*entry) {
      who = RunAs{(*entry)->uid, (*entry)->gid, GroupsOf((*entry)->name, (*entry)->gid), (*entry)->name,
                  (*entry)->home.empty() ? "/" : (*entry)->home};
    } else if (uid_t uid = 0; absl::SimpleAtoi(user, &uid)) {
      who = RunAs{uid, uid, {}, user, "/"};
    } else {
      return absl::NotFoundError(absl::StrCat("no such user \"", user, "\""));
    }
  }
  if (!group.empty()) {
    absl::StatusOr<gid_t> gid = LookUpGroup(group);
    if (!gid.ok()) return absl::NotFoundError(absl::StrCat("group: ", gid.status().message()));
    who.gid = *gid;
    who.groups.push_back(*gid);
  }
  return std::optional<RunAs>(std::move(who));
}

ScopedFsIdentity::ScopedFsIdentity(const std::optional<RunAs>& who) {
  if (!who || ::geteuid() != 0) return;
  const long count = ::syscall(SYS_getgroups, 0, nullptr);
  saved_groups_.resize(count > 0 ? static_cast<std::size_t>(count) : 0);
  if (count < 0 || ::syscall(SYS_getgroups, saved_groups_.size(), saved_groups_.data()) != count) {
    status_ = absl::InternalError(absl::StrCat("getgroups: ", std::strerror(errno)));
    return;
  }
  // setfsuid(2) returns the previous value and cannot report failure: a
  // second call with an invalid id (-1) reads the current one back.
  saved_fsuid_ = static_cast<uid_t>(::syscall(SYS_setfsuid, static_cast<uid_t>(-1)));
  saved_fsgid_ = static_cast<gid_t>(::syscall(SYS_setfsgid, static_cast<gid_t>(-1)));
  switched_ = true;
  const std::vector<gid_t> groups(who->groups.begin(), who->groups.end());
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    status_ = absl::InternalError(absl::StrCat("setgroups as ", who->user, ": ", std::strerror(errno)));
    Restore();
    return;
  }
  ::syscall(SYS_setfsgid, who->gid);
  ::syscall(SYS_setfsuid, who->uid);
  if (static_cast<uid_t>(::syscall(SYS_setfsuid, static_cast<uid_t>(-1))) != who->uid ||
      static_cast<gid_t>(::syscall(SYS_setfsgid, static_cast<gid_t>(-1))) != who->gid) {
    status_ = absl::InternalError(absl::StrCat("setfsuid/setfsgid as ", who->user, " did not take"));
    Restore();
  }
}

ScopedFsIdentity::~ScopedFsIdentity() { Restore(); }

void ScopedFsIdentity::Restore() {
  if (!switched_) return;
  switched_ = false;
  ::syscall(SYS_setfsuid, saved_fsuid_);
  ::syscall(SYS_setfsgid, saved_fsgid_);
  const bool groups_ok = ::syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data()) == 0;
  if (!groups_ok || static_cast<uid_t>(::syscall(SYS_setfsuid, static_cast<uid_t>(-1))) != saved_fsuid_ ||
      static_cast<gid_t>(::syscall(SYS_setfsgid, static_cast<gid_t>(-1))) != saved_fsgid_) {
    // This thread would go on with a job user's file permissions (and write
    // tpud's state as that user): stop, and let systemd restart tpud; the
    // attempts live on under their shims.
    std::fprintf(stderr, "tpud: could not restore this thread's file identity (uid %u, gid %u); aborting\n",
                 saved_fsuid_, saved_fsgid_);
    std::abort();
  }
}

}  // namespace tpud
