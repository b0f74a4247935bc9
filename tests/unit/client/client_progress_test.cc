// How tpuctl shows long waits and incident bundles: the stop ladder's rung in
// `stop`'s line and JSON, progress lines of `reset-tpu` and `stop --wait`,
// and `tpuctl incident`'s summary (client/progress.h, incident_commands.h).
#include <catch2/catch.hpp>
#include <sstream>

#include <nlohmann/json.hpp>

#include "client/format.h"
#include "client/incident_commands.h"
#include "client/progress.h"

namespace tpud::client {
namespace {

using tpud::v1::JobStatus;

JobStatus Stopping(int rung, const std::string& signal, const std::string& next, double next_in) {
  JobStatus job;
  job.set_name("digits");
  job.set_state(tpud::v1::JOB_STATE_STOPPING);
  job.set_pid(4242);
  job.set_attempt(2);
  job.set_reason("stopped by tpuctl");
  tpud::v1::StopProgress* stop = job.mutable_stop();
  stop->set_intent("stop");
  stop->set_rung(rung);
  stop->set_rungs(4);
  stop->set_signal(signal);
  stop->set_next_signal(next);
  stop->set_next_in_seconds(next_in);
  return job;
}

TEST_CASE("Stop progress: a stopping job's line names the rung sent and the next one", "[client][progress]") {
  CHECK(FormatJobLine(Stopping(2, "SIGTERM", "SIGQUIT", 25)) ==
        "digits: stopping (pid 4242, attempt 2) stopped by tpuctl; sent SIGTERM (2 of 4), SIGQUIT in 25.0s");
  CHECK(FormatStopRung(Stopping(4, "SIGKILL", "", 0).stop()) == "sent SIGKILL (4 of 4)");
  CHECK(FormatStopRung(Stopping(0, "", "SIGINT", 0).stop()) == "no signal sent yet, SIGINT in 0.0s");
  const nlohmann::json json = nlohmann::json::parse(JobJson(Stopping(1, "SIGINT", "SIGTERM", 29.5)));
  CHECK(json["stop"]["rung"] == 1);
  CHECK(json["stop"]["signal"] == "SIGINT");
  CHECK(json["stop"]["next_signal"] == "SIGTERM");
  CHECK(json["stop"]["next_in_seconds"] == 29.5);
  JobStatus running;
  running.set_name("digits");
  running.set_state(tpud::v1::JOB_STATE_RUNNING);
  CHECK(nlohmann::json::parse(JobJson(running))["stop"].is_null());
  CHECK(FormatJobLine(running) == "digits: running");
}

TEST_CASE("Progress: one line per change when not a terminal, one line rewritten on a terminal",
          "[client][progress]") {
  CHECK(ProgressLine::Line("reset-tpu", "node STOPPING", 12.34, false) == "reset-tpu: +12.3s node STOPPING");
  CHECK(ProgressLine::Line("reset-tpu", "node STOPPING", 75, true) == "reset-tpu: node STOPPING (1m15s)");
  std::ostringstream piped;
  {
    ProgressLine progress(&piped, false, "reset-tpu");
    progress.Update("node READY, HEALTHY");
    progress.Update("node READY, HEALTHY");
    progress.Update("node STOPPING");
    progress.Update("");
    progress.Update("node STOPPING");
  }
  const std::string text = piped.str();
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.find("reset-tpu: +0.0s node READY, HEALTHY\n") == 0);
  CHECK(text.find("node STOPPING\n") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  std::ostringstream tty;
  {
    ProgressLine progress(&tty, true, "stopping digits");
    progress.Update("sent SIGTERM (1 of 2), SIGKILL in 5.0s");
    progress.Update("sent SIGTERM (1 of 2), SIGKILL in 4.5s");
  }
  CHECK(tty.str().find('\n') == std::string::npos);
  CHECK(tty.str().find("\r\033[Kstopping digits: sent SIGTERM (1 of 2), SIGKILL in 4.5s (") != std::string::npos);
  CHECK(tty.str().size() >= 4);
  CHECK(tty.str().substr(tty.str().size() - 4) == "\r\033[K");  // Cleared when done: the result line follows.
}

TEST_CASE("Incident: the summary shows the verdict, the processes, what is missing and the files",
          "[client][incident]") {
  tpud::v1::GetIncidentResponse bundle;
  bundle.set_job("hangs");
  bundle.set_number(3);
  bundle.set_dir("/var/lib/tpud/incidents/hangs/3");
  bundle.set_summary_json(R"({"job":"hangs","incident":3,"attempt":2,"trigger":"hang",
    "reason":"hang: no progress for 60s","captured_unix_ms":1795255200123,"capture_seconds":0.42,
    "verdict":{"class":"hang","action":"reset_and_restart","hint":"check the collective","line":"","rule":"hang"},
    "processes":[{"pid":77,"comm":"python3","state":"S","wchan":"futex_wait_queue"}],
    "notes":["dmesg: /dev/kmsg: Permission denied"]})");
  for (const auto& [name, size] : std::vector<std::pair<std::string, int>>{{"stacks.txt", 5000}, {"summary.json", 400}}) {
    tpud::v1::IncidentFile* file = bundle.add_files();
    file->set_name(name);
    file->set_size(size);
  }
  bundle.add_numbers(1);
  bundle.add_numbers(3);
  const std::string text = FormatIncidentBundle(bundle);
  CHECK(text.find("incident 3 of hangs, attempt 2 (hang), captured 2026-11-21T10:00:00Z in 0.4 s\n") == 0);
  CHECK(text.find("reason:     hang: no progress for 60s\n") != std::string::npos);
  CHECK(text.find("verdict:    hang -> reset_and_restart: check the collective\n") != std::string::npos);
  CHECK(text.find("  pid 77 python3 state S waiting in futex_wait_queue\n") != std::string::npos);
  CHECK(text.find("not captured:\n  dmesg: /dev/kmsg: Permission denied\n") != std::string::npos);
  CHECK(text.find("files in /var/lib/tpud/incidents/hangs/3:\n  stacks.txt  4.9 KiB\n  summary.json  400 B\n") !=
        std::string::npos);
  CHECK(text.find("bundles of hangs: 1 3 (tpuctl incident hangs N)\n") != std::string::npos);

  bundle.set_summary_json("not json");
  CHECK(FormatIncidentBundle(bundle).find("(summary.json is unreadable)") != std::string::npos);
}

}  // namespace
}  // namespace tpud::client
