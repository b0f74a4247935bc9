// Telling systemd how tpud is doing (Type=notify, WatchdogSec=): the one
// adapter for libsystemd's sd_notify (sd_notify(3), sd_watchdog_enabled(3)).
// Outside systemd ($NOTIFY_SOCKET unset) every call does nothing.
//
// Messages: READY=1 once the control socket listens (with STATUS= and
// MAINPID=); STATUS=<one line about the jobs> whenever it changes (checked on
// each tick); WATCHDOG=1 every half WATCHDOG_USEC from the event loop, so a
// wedged loop stops the pings and systemd restarts tpud; RELOADING=1 then
// READY=1 around a config reload (with MONOTONIC_USEC=, as systemd >= 253
// expects); STOPPING=1 on SIGTERM/SIGINT.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "daemon/supervisor/job.h"

namespace tpud {

// "3 jobs: 2 running, 1 backoff"; "1 job: 1 stopped"; "no jobs". States in
// the order of the JobState enum, each named by JobStateName.
std::string SummarizeJobs(const std::vector<JobSnapshot>& jobs);

// Thread-safety: construct before other threads start (it clears
// WATCHDOG_USEC/WATCHDOG_PID from the environment so jobs do not inherit
// them); every other call on the loop thread of `io`, which must outlive it.
class ServiceNotifier {
 public:
  // `status_line` (called on the loop) gives the STATUS= text, e.g.
  // [&] { return SummarizeJobs(supervisor.List()); }.
  ServiceNotifier(boost::asio::io_context& io, std::function<std::string()> status_line);
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  // READY=1 with STATUS= and MAINPID=; starts the ticks (status, watchdog)
  // and the watch for SIGTERM/SIGINT (STOPPING=1).
  void Ready();
  // RELOADING=1, then after the reload: READY=1 and STATUS=, prefixed with
  // `note` when not empty (e.g. "reload failed: ...; ").
  void Reloading();
  void Reloaded(const std::string& note);

  bool under_systemd() const { return under_systemd_; }
  // The watchdog interval systemd asked for; zero when none.
  std::chrono::microseconds watchdog() const { return watchdog_; }

 private:
  void Notify(const std::string& message);
  void Tick();
  void SendStatus(bool force);

  boost::asio::io_context& io_;
  std::function<std::string()> status_line_;
  bool under_systemd_ = false;
  std::chrono::microseconds watchdog_{0};
  boost::asio::steady_timer timer_;
  boost::asio::signal_set stop_signals_;
  std::string note_;         // Kept in STATUS= until the next reload.
  std::string last_status_;  // What STATUS= said last.
};

}  // namespace tpud
