// How long the SQLite state store's calls take on this machine's disk. PutJob
// runs on the supervisor's event loop thread before each action, so its
// latency (one fsync of the WAL per call, synchronous=FULL) is the number to watch.
//
// Usage: tpud_bench_state_store [DIR]   (default: a fresh directory under /var/tmp;
// pass a directory on the disk that will hold state_dir). Prints "name: value unit".
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "daemon/state/state_store.h"

namespace {

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Runs `op` `n` times; prints its median, p99 and max in milliseconds.
void Measure(const char* name, int n, const std::function<void(int)>& op) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    Clock::time_point start = Clock::now();
    op(i);
    ms.push_back(Millis(Clock::now() - start));
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%s_median: %.3f ms\n", name, ms[ms.size() / 2]);
  std::printf("%s_p99: %.3f ms\n", name, ms[ms.size() * 99 / 100]);
  std::printf("%s_max: %.3f ms\n", name, ms.back());
}

tpud::JobRecord Job(int i) {
  tpud::JobRecord job;
  job.name = "job-" + std::to_string(i % 50);
  job.spec_yaml = std::string(2000, 'y');  // A typical submitted spec.
  job.origin = "submitted:/etc/tpud/jobs.d/x.yaml";
  job.desired_running = true;
  job.state = "running";
  job.attempt = i;
  job.restarts_by_reason = {{"exit_code", i}, {"signal", 1}};
  job.last_exit = tpud::ExitStatus{3, 0, false, ""};
  return job;
}

void Check(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string templ = "/var/tmp/tpud-state-bench-XXXXXX";
  std::filesystem::path dir = argc > 1 ? argv[1] : mkdtemp(templ.data());
  Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<tpud::StateStore>> opened = tpud::OpenSqliteStateStore(dir);
  Check(opened.status());
  std::printf("open_new: %.3f ms\n", Millis(Clock::now() - start));
  tpud::StateStore& store = **opened;

  Measure("put_job", 300, [&](int i) { Check(store.PutJob(Job(i))); });
  std::vector<std::int64_t> ids;
  Measure("open_incident", 100, [&](int i) {
    tpud::IncidentRecord in;
    in.job = "job-1";
    in.started_unix_ms = i;
    absl::StatusOr<std::int64_t> id = store.OpenIncident(in);
    Check(id.status());
    ids.push_back(*id);
  });
  Measure("update_incident", 100, [&](int i) {
    tpud::IncidentRecord in;
    in.id = ids[i];
    in.job = "job-1";
    in.ended_unix_ms = 1000 + i;
    Check(store.UpdateIncident(in));
  });
  Measure("load_jobs_50", 50, [&](int) { Check(store.LoadJobs().status()); });
  Measure("list_incidents_100", 50, [&](int) { Check(store.ListIncidents("", 0).status()); });
  opened->reset();
  start = Clock::now();
  Check(tpud::OpenSqliteStateStore(dir).status());
  std::printf("open_existing: %.3f ms\n", Millis(Clock::now() - start));
  if (argc == 1) std::filesystem::remove_all(dir);
  return 0;
}
