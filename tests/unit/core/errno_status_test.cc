#include "daemon/core/errno_status.h"

#include <catch2/catch.hpp>
#include <cerrno>

namespace tpud {
namespace {

TEST_CASE("ErrnoStatus: a machine short of processes, fds, memory or disk is Unavailable (retried)", "[core]") {
  for (const int err : {EAGAIN, ENOMEM, EMFILE, ENFILE, ENOSPC, EDQUOT}) {
    INFO("errno " << err);
    CHECK(IsTransientErrno(err));
    CHECK(ErrnoStatus(err, "open /x").code() == absl::StatusCode::kUnavailable);
  }
}

TEST_CASE("ErrnoStatus: what no retry fixes keeps its meaning, and the message names the step", "[core]") {
  CHECK(ErrnoStatus(EACCES, "chdir /root").code() == absl::StatusCode::kPermissionDenied);
  CHECK(ErrnoStatus(EPERM, "setuid").code() == absl::StatusCode::kPermissionDenied);
  CHECK(ErrnoStatus(ENOENT, "exec /nope").code() == absl::StatusCode::kNotFound);
  CHECK(ErrnoStatus(EINVAL, "x").code() == absl::StatusCode::kInternal);
  CHECK_FALSE(IsTransientErrno(EINVAL));
  CHECK(ErrnoStatus(ENOSPC, "write /s/spec.json").message() == "write /s/spec.json: No space left on device");
}

}  // namespace
}  // namespace tpud
