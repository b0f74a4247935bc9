// What tpuctl prints: tables, detail lines, JSON shapes scripts rely on, event
// lines, and the failure -> exit code mapping (client/format.h, connection.h).
#include "client/format.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/connection.h"
#include "client/tpuctl.h"

namespace tpud::client {
namespace {

using nlohmann::json;
using tpud::v1::JobEvent;
using tpud::v1::JobStatus;

constexpr std::int64_t kNov21At10 = 1795255200123;  // 2026-11-21T10:00:00.123Z

JobStatus RunningJob() {
  JobStatus job;
  job.set_name("digits");
  job.set_state(tpud::v1::JOB_STATE_RUNNING);
  job.set_pid(4242);
  job.set_attempt(2);
  job.set_restarts(1);
  job.set_max_restarts(5);
  job.mutable_last_exit()->set_exited(true);
  job.mutable_last_exit()->set_code(-1);
  job.mutable_last_exit()->set_signal(9);
  job.mutable_last_exit()->set_signal_name("SIGKILL");
  job.mutable_last_exit()->set_description("killed by SIGKILL");
  job.mutable_checkpoint()->set_found(true);
  job.mutable_checkpoint()->set_step(300);
  job.mutable_checkpoint()->set_path("/ckpt/digits/step_300");
  job.set_reason("resumed from step 300");
  job.set_uptime_seconds(3725.5);
  job.add_command("python3");
  job.add_command("train.py");
  job.set_origin("config:/etc/tpud/jobs.d/digits.yaml");
  job.set_log_path("/var/log/tpud/digits.log");
  job.set_state_since_unix_ms(kNov21At10);
  job.set_last_step(340);
  return job;
}

// Never started: no pid, no exit, no checkpoint (step -1 as the API sends it).
JobStatus StoppedJob() {
  JobStatus job;
  job.set_name("a-much-longer-name");
  job.set_state(tpud::v1::JOB_STATE_STOPPED);
  job.set_max_restarts(3);
  job.mutable_checkpoint()->set_step(-1);
  job.set_reason("not started");
  job.set_last_step(-1);
  return job;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("StateName: lowercase enum name without prefix", "[client]") {
  CHECK(StateName(tpud::v1::JOB_STATE_RUNNING) == "running");
  CHECK(StateName(tpud::v1::JOB_STATE_BACKOFF) == "backoff");
  CHECK(StateName(tpud::v1::JOB_STATE_SUCCEEDED) == "succeeded");
  CHECK(StateName(tpud::v1::JOB_STATE_UNSPECIFIED) == "unknown");
  CHECK(StateName(static_cast<tpud::v1::JobState>(99)) == "unknown");
}

TEST_CASE("FormatUptime: two units at most, truncated", "[client]") {
  const std::vector<std::pair<double, std::string>> cases = {
      {0, "0s"},          {0.9, "0s"},        {45, "45s"},          {59.99, "59s"},
      {60, "1m00s"},      {307, "5m07s"},     {3599, "59m59s"},     {3600, "1h00m"},
      {3725.5, "1h02m"},  {86399, "23h59m"},  {86400 + 4 * 3600, "1d04h"},
      {-5, "0s"},         {NAN, "0s"},        {INFINITY, "0s"}};
  for (const auto& [seconds, expected] : cases) {
    INFO("seconds = " << seconds);
    CHECK(FormatUptime(seconds) == expected);
  }
}

TEST_CASE("FormatUtcTime: ISO 8601 UTC with milliseconds", "[client]") {
  CHECK(FormatUtcTime(kNov21At10) == "2026-11-21T10:00:00.123Z");
  CHECK(FormatUtcTime(0) == "1970-01-01T00:00:00.000Z");
  CHECK(FormatUtcTime(-1) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("FormatCheckpoint and FormatLastExit: short forms", "[client]") {
  tpud::v1::Checkpoint checkpoint;
  CHECK(FormatCheckpoint(checkpoint) == "-");
  checkpoint.set_found(true);
  checkpoint.set_step(300);
  CHECK(FormatCheckpoint(checkpoint) == "step 300");
  checkpoint.set_step(-1);
  checkpoint.set_path("/ckpt/run/final");
  CHECK(FormatCheckpoint(checkpoint) == "final");

  tpud::v1::ExitInfo exit;
  CHECK(FormatLastExit(exit) == "-");
  exit.set_exited(true);
  exit.set_code(3);
  CHECK(FormatLastExit(exit) == "exit 3");
  exit.set_code(-1);
  CHECK(FormatLastExit(exit) == "spawn failed");
  exit.set_signal(77);
  CHECK(FormatLastExit(exit) == "signal 77");
  exit.set_signal_name("SIGKILL");
  CHECK(FormatLastExit(exit) == "SIGKILL");
}

TEST_CASE("FormatStatusTable: aligned columns, '-' for what is missing", "[client]") {
  const std::vector<std::string> lines = Lines(FormatStatusTable({RunningJob(), StoppedJob()}));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "NAME                STATE    PID   ATTEMPT  RESTARTS  UPTIME  STEP  CHECKPOINT  "
        "LAST-EXIT  REASON");
  CHECK(lines[1] ==
        "digits              running  4242  2        1/5       1h02m   340   step 300    "
        "SIGKILL    resumed from step 300");
  CHECK(lines[2] ==
        "a-much-longer-name  stopped  -     0        0/3       -       -     -           "
        "-          not started");
}

TEST_CASE("FormatStatusTable: a gang job's row says how the whole gang is, not only this worker", "[client]") {
  JobStatus job = RunningJob();
  tpud::v1::GangStatus* gang = job.mutable_gang();
  gang->set_generation(3);
  gang->set_phase("starting");
  gang->set_step(300);
  gang->set_restarts(1);
  gang->set_reason("worker 1: crash: exit code 1");
  const auto add = [&](int worker, bool up, tpud::v1::JobState state) {
    tpud::v1::WorkerJobStatus* w = gang->add_workers();
    w->set_worker(worker);
    w->set_host("host-" + std::to_string(worker));
    w->set_up(up);
    w->set_state(state);
    w->set_generation(3);
    w->set_attempt(2);
    w->set_last_step(-1);
  };
  add(0, true, tpud::v1::JOB_STATE_RUNNING);
  add(1, true, tpud::v1::JOB_STATE_STARTING);
  add(2, false, tpud::v1::JOB_STATE_RUNNING);
  add(3, true, tpud::v1::JOB_STATE_UNSPECIFIED);
  const std::vector<std::string> lines = Lines(FormatStatusTable({job}));
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[1], Catch::EndsWith("[gang generation 3 starting: 1 of 4 workers running, 1 lost] resumed "
                                       "from step 300"));
  // `tpuctl status NAME`: one row per worker; a lost one says so, one that never reported shows "-".
  const std::vector<std::string> detail = Lines(FormatJobDetail(job));
  const auto row = [&](const std::string& start) {
    for (const std::string& line : detail) {
      if (line.rfind(start, 0) == 0) return line;
    }
    return std::string();
  };
  CHECK_THAT(row("gang:"), Catch::EndsWith("generation 3, starting from step 300"));
  CHECK_THAT(row("2 "), Catch::Matches("2 +host-2 +lost +running +3 +2 .*"));
  CHECK_THAT(row("3 "), Catch::Matches("3 +host-3 +up +- +- +- .*"));
}

TEST_CASE("FormatStatusTable: header only for no jobs, no trailing blanks", "[client]") {
  CHECK(FormatStatusTable({}) ==
        "NAME  STATE  PID  ATTEMPT  RESTARTS  UPTIME  STEP  CHECKPOINT  LAST-EXIT  REASON\n");
  JobStatus no_reason = StoppedJob();
  no_reason.clear_reason();
  for (const std::string& line : Lines(FormatStatusTable({no_reason}))) {
    CHECK(line.back() != ' ');
  }
}

TEST_CASE("FormatJobDetail: one field per line", "[client]") {
  const std::string detail = FormatJobDetail(RunningJob());
  CHECK_THAT(detail, Catch::Contains("state:       running since 2026-11-21T10:00:00.123Z\n"));
  CHECK_THAT(detail, Catch::Contains("checkpoint:  step 300 (/ckpt/digits/step_300)\n"));
  CHECK_THAT(detail, Catch::Contains("last exit:   killed by SIGKILL\n"));
  CHECK_THAT(detail, Catch::Contains("command:     python3 train.py\n"));
  CHECK_THAT(detail, Catch::Contains("uptime:      1h02m\n"));
  CHECK_THAT(detail, Catch::Contains("step:        340\n"));
  CHECK_THAT(detail, !Catch::Contains("last failure:"));  // It never failed.
  CHECK_THAT(FormatJobDetail(StoppedJob()), !Catch::Contains("uptime:"));
  CHECK_THAT(FormatJobDetail(StoppedJob()), !Catch::Contains("step:"));
}

TEST_CASE("FormatJobLine: what start/stop/restart print", "[client]") {
  CHECK(FormatJobLine(RunningJob()) ==
        "digits: running (pid 4242, attempt 2) resumed from step 300");
  CHECK(FormatJobLine(StoppedJob()) == "a-much-longer-name: stopped not started");
}

TEST_CASE("JobJson: the fields scripts read", "[client]") {
  const json job = json::parse(JobJson(RunningJob()));
  CHECK(job["name"] == "digits");
  CHECK(job["state"] == "running");
  CHECK(job["pid"] == 4242);
  CHECK(job["attempt"] == 2);
  CHECK(job["restarts"] == 1);
  CHECK(job["max_restarts"] == 5);
  CHECK(job["last_exit"] == json{{"exited", true},         {"code", nullptr}, {"signal", 9},
                                 {"signal_name", "SIGKILL"}, {"description", "killed by SIGKILL"}});
  CHECK(job["checkpoint"] == json{{"path", "/ckpt/digits/step_300"}, {"step", 300}});
  CHECK(job["reason"] == "resumed from step 300");
  CHECK(job["uptime_seconds"] == 3725.5);
  CHECK(job["command"] == json{"python3", "train.py"});
  CHECK(job["origin"] == "config:/etc/tpud/jobs.d/digits.yaml");
  CHECK(job["log_path"] == "/var/log/tpud/digits.log");
  CHECK(job["state_since"] == "2026-11-21T10:00:00.123Z");
  CHECK(job["last_step"] == 340);
  CHECK(job["last_failure"].is_null());
  CHECK(job["failures_by_class"] == json::object());
}

TEST_CASE("JobJson: nulls for no pid, no exit yet and no checkpoint", "[client]") {
  const json job = json::parse(JobJson(StoppedJob()));
  CHECK(job["pid"].is_null());
  CHECK(job["last_exit"]["exited"] == false);
  CHECK(job["last_exit"]["code"].is_null());
  CHECK(job["last_exit"]["signal"].is_null());
  CHECK(job["checkpoint"]["path"].is_null());
  CHECK(job["checkpoint"]["step"].is_null());
  CHECK(job["state_since"].is_null());
  CHECK(job["last_step"].is_null());

  JobStatus exited = StoppedJob();
  exited.mutable_last_exit()->set_exited(true);
  exited.mutable_last_exit()->set_code(0);
  const json last_exit = json::parse(JobJson(exited))["last_exit"];
  CHECK(last_exit["code"] == 0);
  CHECK(last_exit["signal"].is_null());
}

TEST_CASE("JobsJson: an array in the given order", "[client]") {
  const json jobs = json::parse(JobsJson({RunningJob(), StoppedJob()}));
  REQUIRE(jobs.is_array());
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0]["name"] == "digits");
  CHECK(jobs[1]["name"] == "a-much-longer-name");
  CHECK(jobs[1]["state"] == "stopped");
  CHECK(JobsJson({}) == "[]");
}

JobEvent Event(tpud::v1::JobState from, tpud::v1::JobState to, std::string reason) {
  JobEvent event;
  event.set_sequence(7);
  event.set_time_unix_ms(kNov21At10);
  event.set_job("digits");
  event.set_from(from);
  event.set_to(to);
  event.set_attempt(2);
  event.set_reason(std::move(reason));
  return event;
}

TEST_CASE("FormatEventLine: time job from -> to attempt extras reason", "[client]") {
  JobEvent up = Event(tpud::v1::JOB_STATE_STARTING, tpud::v1::JOB_STATE_RUNNING, "up for 10s");
  CHECK(FormatEventLine(up) ==
        "2026-11-21T10:00:00.123Z digits starting -> running attempt=2 up for 10s");

  JobEvent crash = Event(tpud::v1::JOB_STATE_RUNNING, tpud::v1::JOB_STATE_BACKOFF, "exit code 3");
  crash.mutable_exit()->set_exited(true);
  crash.mutable_exit()->set_code(3);
  CHECK(FormatEventLine(crash) ==
        "2026-11-21T10:00:00.123Z digits running -> backoff attempt=2 code=3 exit code 3");

  JobEvent killed = Event(tpud::v1::JOB_STATE_STOPPING, tpud::v1::JOB_STATE_STOPPED, "");
  killed.mutable_exit()->set_exited(true);
  killed.mutable_exit()->set_signal(9);
  killed.mutable_exit()->set_signal_name("SIGKILL");
  CHECK(FormatEventLine(killed) ==
        "2026-11-21T10:00:00.123Z digits stopping -> stopped attempt=2 signal=SIGKILL");

  JobEvent resume = Event(tpud::v1::JOB_STATE_BACKOFF, tpud::v1::JOB_STATE_STARTING, "restart");
  resume.mutable_checkpoint()->set_found(true);
  resume.mutable_checkpoint()->set_step(300);
  CHECK(FormatEventLine(resume) ==
        "2026-11-21T10:00:00.123Z digits backoff -> starting attempt=2 step=300 restart");
}

TEST_CASE("EventJson: one object per line with exit and checkpoint or null", "[client]") {
  JobEvent crash = Event(tpud::v1::JOB_STATE_RUNNING, tpud::v1::JOB_STATE_BACKOFF, "exit code 3");
  crash.mutable_exit()->set_exited(true);
  crash.mutable_exit()->set_code(3);
  const std::string line = EventJson(crash);
  CHECK(line.find('\n') == std::string::npos);
  const json event = json::parse(line);
  CHECK(event["type"] == "transition");
  CHECK(event["sequence"] == 7);
  CHECK(event["time"] == "2026-11-21T10:00:00.123Z");
  CHECK(event["time_unix_ms"] == kNov21At10);
  CHECK(event["job"] == "digits");
  CHECK(event["from"] == "running");
  CHECK(event["to"] == "backoff");
  CHECK(event["attempt"] == 2);
  CHECK(event["reason"] == "exit code 3");
  CHECK(event["exit"]["code"] == 3);
  CHECK(event["checkpoint"].is_null());
}

TEST_CASE("JobJson: invalid UTF-8 from the daemon does not throw", "[client]") {
  JobStatus job = StoppedJob();
  job.set_reason(std::string("bad \xff byte"));
  CHECK_NOTHROW(json::parse(JobJson(job)));
}

TEST_CASE("ResultFromStatus: gRPC codes -> exit codes and one-line messages", "[client]") {
  const std::string socket = "/run/tpud/tpud.sock";
  const std::chrono::duration<double> timeout{10};
  CHECK(ResultFromStatus(grpc::Status::OK, socket, timeout).ok());

  const Result not_found =
      ResultFromStatus({grpc::StatusCode::NOT_FOUND, "unknown job \"x\""}, socket, timeout);
  CHECK(not_found.exit_code == kExitNotFound);
  CHECK(not_found.message == "unknown job \"x\"");

  const Result invalid =
      ResultFromStatus({grpc::StatusCode::INVALID_ARGUMENT, "a.yaml: bad\nline"}, socket, timeout);
  CHECK(invalid.exit_code == kExitInvalidArgument);
  CHECK(invalid.message == "a.yaml: bad; line");

  const Result unavailable =
      ResultFromStatus({grpc::StatusCode::UNAVAILABLE, "Socket closed"}, socket, timeout);
  CHECK(unavailable.exit_code == kExitUnreachable);
  CHECK(unavailable.message ==
        "cannot reach tpud at /run/tpud/tpud.sock: socket closed "
        "(is tpud running? set --socket or TPUD_SOCKET)");

  CHECK(ResultFromStatus({grpc::StatusCode::DEADLINE_EXCEEDED, ""}, socket, timeout).message ==
        "no answer from tpud within 10s (see --timeout)");
  const Result denied =
      ResultFromStatus({grpc::StatusCode::PERMISSION_DENIED, ""}, socket, timeout);
  CHECK(denied.exit_code == kExitError);
  CHECK(denied.message == "permission denied");
}

TEST_CASE("ProbeUnixSocket: names why a socket cannot be reached", "[client]") {
  CHECK(ProbeUnixSocket("/nonexistent/tpud-test.sock") == "no such file or directory");
  CHECK_THAT(ProbeUnixSocket(std::string(200, 'x')), Catch::StartsWith("socket path longer than"));
}

}  // namespace
}  // namespace tpud::client

namespace tpud::client {
namespace {

TEST_CASE("FormatJobDetail: goodput with its badput causes, JSON with every cause", "[client]") {
  JobStatus job;
  job.set_name("digits");
  job.set_state(tpud::v1::JOB_STATE_RUNNING);
  tpud::v1::Goodput* goodput = job.mutable_goodput();
  goodput->set_ratio(0.75);
  goodput->set_productive_seconds(3600);
  (*goodput->mutable_badput_seconds())["startup"] = 600;
  (*goodput->mutable_badput_seconds())["recovery"] = 12.34;
  (*goodput->mutable_badput_seconds())["wasted_progress"] = 587.66;
  (*goodput->mutable_badput_seconds())["hang_detection"] = 0;
  CHECK_THAT(FormatJobDetail(job),
             Catch::Contains("goodput:     75.0% of 1h20m (badput: startup 10m00s, wasted_progress "
                             "9m47s, recovery 12.3s)\n"));
  const auto json = nlohmann::json::parse(JobJson(job));
  CHECK(json["goodput"]["ratio"] == 0.75);
  CHECK(json["goodput"]["badput_seconds"]["recovery"] == 12.34);

  job.clear_goodput();
  CHECK_THAT(FormatJobDetail(job), !Catch::Contains("goodput"));
  CHECK(nlohmann::json::parse(JobJson(job))["goodput"].is_null());
}

}  // namespace
}  // namespace tpud::client
