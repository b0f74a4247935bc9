// How tpuctl shows failures: the "last failure:" block of `status NAME`, the
// class in LAST-EXIT, "last_failure" in --json, and incident lines and
// records of `events` (client/format.h, format_incident.cc, format_events.cc).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/format.h"

namespace tpud::client {
namespace {

using nlohmann::json;
using tpud::v1::Incident;
using tpud::v1::JobStatus;

constexpr std::int64_t kNov21At10 = 1795255200123;  // 2026-11-21T10:00:00.123Z
constexpr char kBarrierLine[] =
    "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
    "PjRT_Client_Connect. Job: jax_worker. # of tasks that reached the barrier: 3/4.";

// Attempt 3 hit a TPU deadline at step 1234; attempt 4 resumed from 1200.
Incident ClosedIncident() {
  Incident incident;
  incident.set_id(2);
  incident.set_job("digits");
  incident.set_attempt(3);
  incident.set_time_unix_ms(kNov21At10);
  tpud::v1::Failure* failure = incident.mutable_failure();
  failure->set_failure_class("deadline_exceeded");
  failure->set_action("reset_and_restart");
  failure->set_hint("a TPU worker stopped answering; tpud resets the TPU and restarts");
  failure->set_matched_line(kBarrierLine);
  failure->set_rule("builtin:deadline_exceeded");
  incident.mutable_exit()->set_exited(true);
  incident.mutable_exit()->set_code(1);
  incident.mutable_exit()->set_description("exit code 1");
  incident.set_counted(true);
  incident.set_step_reached(1234);
  incident.set_checkpoint_step(1200);
  incident.set_steps_lost(34);
  incident.set_downtime_seconds(12.34);
  incident.set_outcome("restarted");
  return incident;
}

// A preemption seen a moment ago, decided by the exit status, nothing known
// about steps yet.
Incident OpenIncident() {
  Incident incident;
  incident.set_id(3);
  incident.set_job("digits");
  incident.set_attempt(4);
  incident.set_time_unix_ms(kNov21At10);
  incident.mutable_failure()->set_failure_class("preemption");
  incident.mutable_failure()->set_action("wait_and_restart");
  incident.mutable_failure()->set_rule("exit:signal SIGTERM");
  incident.mutable_exit()->set_exited(true);
  incident.mutable_exit()->set_code(-1);
  incident.mutable_exit()->set_signal(15);
  incident.mutable_exit()->set_signal_name("SIGTERM");
  incident.set_step_reached(-1);
  incident.set_checkpoint_step(-1);
  incident.set_steps_lost(-1);
  incident.set_open(true);
  incident.set_outcome("waiting for the maintenance event to end");
  return incident;
}

// Running attempt 4 after ClosedIncident; last_exit is attempt 3's.
JobStatus RecoveredJob() {
  JobStatus job;
  job.set_name("digits");
  job.set_state(tpud::v1::JOB_STATE_RUNNING);
  job.set_pid(4242);
  job.set_attempt(4);
  job.set_restarts(2);
  job.set_max_restarts(5);
  job.mutable_last_exit()->set_exited(true);
  job.mutable_last_exit()->set_code(1);
  job.mutable_last_exit()->set_description("exit code 1");
  job.mutable_checkpoint()->set_found(true);
  job.mutable_checkpoint()->set_step(1200);
  job.set_reason("up for 10s");
  job.set_last_step(1250);
  *job.mutable_last_incident() = ClosedIncident();
  (*job.mutable_failures_by_class())["hbm_oom"] = 1;
  (*job.mutable_failures_by_class())["deadline_exceeded"] = 2;
  return job;
}

TEST_CASE("FormatDowntime: tenths under a minute, then two units", "[client]") {
  const std::vector<std::pair<double, std::string>> cases = {
      {0, "0.0s"},    {2.3, "2.3s"},     {12.34, "12.3s"}, {12.36, "12.4s"},
      {59.9, "59.9s"}, {59.96, "1m00s"}, {307, "5m07s"},   {-1, "0.0s"}, {NAN, "0.0s"}};
  for (const auto& [seconds, expected] : cases) {
    INFO("seconds = " << seconds);
    CHECK(FormatDowntime(seconds) == expected);
  }
}

TEST_CASE("FormatMatchedLine: printable, trimmed, cut with ... on a code point", "[client]") {
  CHECK(FormatMatchedLine("  RESOURCE_EXHAUSTED: hbm\r\n", 100) == "RESOURCE_EXHAUSTED: hbm");
  CHECK(FormatMatchedLine("\x1b[31mError\x1b[0m:\tboom", 100) == "Error: boom");
  CHECK(FormatMatchedLine("0123456789", 10) == "0123456789");
  CHECK(FormatMatchedLine("0123456789", 9) == "012345...");
  CHECK(FormatMatchedLine("0123 56789", 8) == "0123...");  // No blank before "...".
  CHECK(FormatMatchedLine("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4) == "\xc3\xa9...");
  CHECK(FormatMatchedLine("abcdef", 0) == "a...");  // At least one character is kept.
  CHECK(FormatMatchedLine(" \t ", 100).empty());
}

TEST_CASE("FormatStatusTable: LAST-EXIT carries the class of the failure that exit was",
          "[client]") {
  JobStatus job = RecoveredJob();
  CHECK_THAT(FormatStatusTable({job}), Catch::Contains("  deadline_exceeded (exit 1)  "));
  CHECK_THAT(FormatStatusTable({job}), Catch::Contains("  1250  step 1200  "));

  job.set_state(tpud::v1::JOB_STATE_BACKOFF);  // Attempt 4 failed too, no incident yet.
  CHECK_THAT(FormatStatusTable({job}), !Catch::Contains("deadline_exceeded"));

  job.set_attempt(3);  // Backoff after attempt 3: the exit is the incident's.
  CHECK_THAT(FormatStatusTable({job}), Catch::Contains("  deadline_exceeded (exit 1)  "));
}

TEST_CASE("FormatJobDetail: a 'last failure:' block after the job's fields", "[client]") {
  const std::string detail = FormatJobDetail(RecoveredJob());
  CHECK_THAT(detail, Catch::Contains("step:        1250\n"));
  CHECK_THAT(detail, Catch::Contains("failures:    deadline_exceeded 2, hbm_oom 1\n"));
  CHECK_THAT(detail,
             Catch::EndsWith(
                 "log:         -\n"
                 "last failure:\n"
                 "  incident:  #2 (attempt 3) at 2026-11-21T10:00:00.123Z\n"
                 "  class:     deadline_exceeded\n"
                 "  action:    reset_and_restart\n"
                 "  hint:      a TPU worker stopped answering; tpud resets the TPU and restarts\n"
                 "  line:      \"jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed "
                 "out. Barrier_id: PjRT_Client_Connect...\"\n"
                 "  rule:      builtin:deadline_exceeded\n"
                 "  exit:      exit code 1\n"
                 "  steps:     reached 1234, resumed from 1200 (34 steps lost)\n"
                 "  downtime:  12.3s\n"
                 "  outcome:   restarted\n"
                 "  counted:   yes, against max_restarts\n"));
}

TEST_CASE("FormatJobDetail: an open failure decided by the exit status", "[client]") {
  JobStatus job = RecoveredJob();
  *job.mutable_last_incident() = OpenIncident();
  const std::string detail = FormatJobDetail(job);
  CHECK_THAT(detail, Catch::Contains("  line:      - (decided by the exit status)\n"));
  CHECK_THAT(detail, Catch::Contains("  hint:      -\n"));
  CHECK_THAT(detail, Catch::Contains("  exit:      SIGTERM\n"));
  CHECK_THAT(detail, Catch::Contains("  steps:     reached -, resumed from -\n"));
  CHECK_THAT(detail, Catch::Contains("  downtime:  - (still open)\n"));
  CHECK_THAT(detail, Catch::Contains("  outcome:   waiting for the maintenance event to end\n"));
  CHECK_THAT(detail, Catch::Contains("  counted:   no, max_restarts untouched\n"));
}

TEST_CASE("FormatJobDetail: a hang says no progress came, not that the exit status decided", "[client]") {
  JobStatus job = RecoveredJob();
  Incident hang = OpenIncident();
  hang.mutable_failure()->set_failure_class("hang");
  hang.mutable_failure()->set_rule("hang");
  *job.mutable_last_incident() = hang;
  const std::string detail = FormatJobDetail(job);
  CHECK_THAT(detail, Catch::Contains("  line:      - (no progress before the hang deadline)\n"));
}

TEST_CASE("JobJson: last_failure, failures_by_class and last_step", "[client]") {
  const json job = json::parse(JobJson(RecoveredJob()));
  CHECK(job["last_step"] == 1250);
  CHECK(job["failures_by_class"].dump() == R"({"deadline_exceeded":2,"hbm_oom":1})");
  const json failure = job["last_failure"];
  CHECK(failure["id"] == 2);
  CHECK(failure["time"] == "2026-11-21T10:00:00.123Z");
  CHECK(failure["attempt"] == 3);
  CHECK(failure["class"] == "deadline_exceeded");
  CHECK(failure["action"] == "reset_and_restart");
  CHECK(failure["hint"] == "a TPU worker stopped answering; tpud resets the TPU and restarts");
  CHECK(failure["matched_line"] == kBarrierLine);  // Whole, not shortened.
  CHECK(failure["rule"] == "builtin:deadline_exceeded");
  CHECK(failure["exit"]["code"] == 1);
  CHECK(failure["counted"] == true);
  CHECK(failure["step_reached"] == 1234);
  CHECK(failure["checkpoint_step"] == 1200);
  CHECK(failure["steps_lost"] == 34);
  CHECK(failure["downtime_seconds"] == 12.34);
  CHECK(failure["open"] == false);
  CHECK(failure["outcome"] == "restarted");
  CHECK_FALSE(failure.contains("type"));
}

TEST_CASE("JobJson: unknown steps are null in last_failure", "[client]") {
  JobStatus job = RecoveredJob();
  *job.mutable_last_incident() = OpenIncident();
  const json failure = json::parse(JobJson(job))["last_failure"];
  CHECK(failure["step_reached"].is_null());
  CHECK(failure["checkpoint_step"].is_null());
  CHECK(failure["steps_lost"].is_null());
  CHECK(failure["matched_line"] == "");
  CHECK(failure["open"] == true);
  CHECK(failure["exit"]["signal_name"] == "SIGTERM");
}

TEST_CASE("FormatIncidentLine: closed with downtime and outcome, then the line", "[client]") {
  CHECK(FormatIncidentLine(ClosedIncident()) ==
        "2026-11-21T10:00:00.123Z digits INCIDENT #2 attempt=3 class=deadline_exceeded "
        "action=reset_and_restart code=1 step=1234 resumed=1200 lost=34 downtime=12.3s "
        "restarted \"jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
        "Barrier_id: PjRT_Client_Connect...\"");

  Incident gave_up = ClosedIncident();  // A long outcome is cut before the quoted line.
  gave_up.set_outcome(
      "gave up: deadline_exceeded: exit code 1 again at step 1234: the same failure twice in a row");
  CHECK_THAT(FormatIncidentLine(gave_up),
             Catch::Contains(" downtime=12.3s gave up: deadline_exceeded: exit code 1 again at "
                             "step 123... \"jax.errors."));
}

TEST_CASE("FormatIncidentLine: open shows no downtime, unknown steps are left out",
          "[client]") {
  const std::string line = FormatIncidentLine(OpenIncident());
  CHECK(line ==
        "2026-11-21T10:00:00.123Z digits INCIDENT #3 attempt=4 class=preemption "
        "action=wait_and_restart signal=SIGTERM open: waiting for the maintenance event to end");
  CHECK(line.find(" -> ") == std::string::npos);  // Never read as a state change.

  Incident learned = OpenIncident();  // Step reached known, resume point not yet.
  learned.set_step_reached(900);
  learned.clear_outcome();
  CHECK_THAT(FormatIncidentLine(learned), Catch::EndsWith("signal=SIGTERM step=900 open"));
}

TEST_CASE("IncidentJson: type incident, the last_failure fields, nulls", "[client]") {
  const std::string line = IncidentJson(ClosedIncident());
  CHECK(line.find('\n') == std::string::npos);
  CHECK_THAT(line, Catch::StartsWith(R"({"type":"incident","id":2,)"));
  const json closed = json::parse(line);
  CHECK(closed["type"] == "incident");
  CHECK(closed["id"] == 2);
  CHECK(closed["job"] == "digits");
  CHECK(closed["time_unix_ms"] == kNov21At10);
  CHECK(closed["steps_lost"] == 34);
  CHECK(closed["downtime_seconds"] == 12.34);
  CHECK(closed["outcome"] == "restarted");

  const json open = json::parse(IncidentJson(OpenIncident()));
  CHECK(open["type"] == "incident");
  CHECK(open["open"] == true);
  CHECK(open["steps_lost"].is_null());
  CHECK(open["counted"] == false);
}

}  // namespace
}  // namespace tpud::client
