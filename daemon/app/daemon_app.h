// Wires the real dependencies together and runs tpud until SIGTERM/SIGINT.
#pragma once

#include "absl/status/status.h"
#include "daemon/config/config.h"

namespace tpud {

// The version compiled in (CMake's PROJECT_VERSION).
const char* TpudVersion();

// Creates state_dir, log_dir and the socket's directory; listens on the unix
// socket (refusing when another tpud already answers there) and on
// metrics.listen; adds the configured jobs and starts the autostart ones;
// runs the event loop. On SIGTERM or SIGINT it stops every job through its
// stop ladder, then returns OK. Errors: a socket or metrics address that
// cannot be used, a directory that cannot be created (message names it).
absl::Status RunDaemon(const DaemonConfig& config);

}  // namespace tpud
