#include "daemon/app/systemd_notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace tpud {
namespace {

// Status and watchdog ticks when systemd asks for no watchdog.
constexpr std::chrono::seconds kStatusInterval(5);

std::uint64_t MonotonicMicros() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1000000 + static_cast<std::uint64_t>(now.tv_nsec) / 1000;
}

}  // namespace

std::string SummarizeJobs(const std::vector<JobSnapshot>& jobs) {
  if (jobs.empty()) return "no jobs";
  std::map<JobState, int> counts;
  for (const JobSnapshot& job : jobs) ++counts[job.state];
  std::vector<std::string> parts;
  for (const auto& [state, count] : counts) parts.push_back(absl::StrCat(count, " ", JobStateName(state)));
  return absl::StrCat(jobs.size(), jobs.size() == 1 ? " job: " : " jobs: ", absl::StrJoin(parts, ", "));
}

ServiceNotifier::ServiceNotifier(boost::asio::io_context& io, std::function<std::string()> status_line)
    : io_(io), status_line_(std::move(status_line)), timer_(io), stop_signals_(io) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  under_systemd_ = socket != nullptr && socket[0] != '\0';
  std::uint64_t usec = 0;
  // unset_environment=1: the jobs tpud starts must not think the watchdog is theirs.
  if (::sd_watchdog_enabled(1, &usec) > 0) watchdog_ = std::chrono::microseconds(usec);
}

ServiceNotifier::~ServiceNotifier() = default;

void ServiceNotifier::Notify(const std::string& message) {
  if (!under_systemd_) return;
  if (const int r = ::sd_notify(0, message.c_str()); r < 0) {
    spdlog::warn("sd_notify: {}", std::strerror(-r));
  }
}

void ServiceNotifier::Ready() {
  last_status_ = note_ + status_line_();
  Notify(absl::StrCat("READY=1\nSTATUS=", last_status_, "\nMAINPID=", ::getpid()));
  if (!under_systemd_) return;
  stop_signals_.add(SIGTERM);
  stop_signals_.add(SIGINT);
  stop_signals_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) Notify("STOPPING=1");
  });
  Tick();
}

void ServiceNotifier::Reloading() { Notify(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", MonotonicMicros())); }

void ServiceNotifier::Reloaded(const std::string& note) {
  note_ = absl::StrReplaceAll(note, {{"\n", "; "}});  // STATUS= is one line.
  last_status_ = note_ + status_line_();
  Notify(absl::StrCat("READY=1\nSTATUS=", last_status_));
}

void ServiceNotifier::SendStatus(bool force) {
  std::string status = note_ + status_line_();
  if (!force && status == last_status_) return;
  last_status_ = std::move(status);
  Notify(absl::StrCat("STATUS=", last_status_));
}

void ServiceNotifier::Tick() {
  SendStatus(/*force=*/false);
  if (watchdog_.count() > 0) Notify("WATCHDOG=1");
  std::chrono::steady_clock::duration interval = kStatusInterval;
  if (watchdog_.count() > 0)
    interval = std::min(interval, std::chrono::steady_clock::duration(watchdog_ / 2));
  timer_.expires_after(interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Tick();
  });
}

}  // namespace tpud
