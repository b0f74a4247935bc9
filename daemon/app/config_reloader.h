// Config reload, the acting part: on SIGHUP (`systemctl reload tpud`, whose
// ExecReload sends it), re-read the config file tpud started with and apply
// the difference (reload.h has the rules). A config that does not load is
// rejected whole: the error, naming file, line and key, is logged, systemd's
// STATUS= says so, and the daemon carries on with what it had.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "absl/status/status.h"
#include "daemon/app/reload.h"
#include "daemon/app/systemd_notify.h"
#include "daemon/config/config.h"
#include "daemon/supervisor/supervisor.h"

namespace tpud {

// Applies `plan` to `supervisor` and logs each change. Failures of single
// steps (which a plan from PlanReload should never cause) are logged and the
// rest is still applied; returns the first one.
// Thread-safety: on the supervisor's loop thread.
absl::Status ApplyReloadPlan(const ReloadPlan& plan, Supervisor& supervisor);

// Thread-safety: construct, destroy and call on the loop thread of `io`; `io`,
// `supervisor` and `notifier` must outlive it.
class ConfigReloader {
 public:
  // Handles SIGHUP from now on. `running` is the config tpud started with.
  // SIGTERM/SIGINT end reloading: a SIGHUP during shutdown is logged and ignored.
  ConfigReloader(boost::asio::io_context& io, Supervisor& supervisor, DaemonConfig running,
                 ServiceNotifier& notifier);

  // Re-reads the config now and applies it. Errors: the load error (the
  // running config stays), or the first step that failed.
  absl::Status Reload();

 private:
  void Wait();

  Supervisor& supervisor_;
  const DaemonConfig running_;  // Top-level keys stay as started (see reload.h).
  ServiceNotifier& notifier_;
  boost::asio::signal_set signals_;
  bool shutting_down_ = false;
};

}  // namespace tpud
