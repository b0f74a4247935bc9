// Multi-host slices end to end: several real tpud processes on this machine
// act as the workers of one slice, agreeing through a real etcd on loopback,
// and run one gang job (tests/data/gang_trainer.py) with real child processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/etcd_cluster.h"
#include "tests/integration/adversity.h"
#include "tests/integration/harness.h"
#include "tests/integration/processes.h"
#include "tests/integration/tpu_cloud.h"

namespace tpud::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTrainer = std::string(TPUD_SOURCE_DIR) + "/tests/data/gang_trainer.py";

// The slice's lines of a tpud's log (what a failed test needs to show).
std::string SliceLines(const std::string& log) {
  std::string out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("slice ") != std::string::npos || line.find("etcd") != std::string::npos) out += line + "\n";
  }
  return out;
}

// One gang job on `workers` tpuds.
class Slice {
 public:
  // `progress_timeout` (seconds, 0: none): a worker with no step for that long hangs.
  // `extra_daemon_yaml`: more top-level keys of every worker's tpud.yaml.
  // `worker_yaml(w)`: more top-level keys for worker w alone.
  // `lease_seconds`: slice.etcd.lease_seconds of every worker.
  Slice(int workers, int etcd_members = 1, int progress_timeout = 0, std::string extra_daemon_yaml = "",
        std::function<std::string(int)> worker_yaml = nullptr, int lease_seconds = 3)
      : etcd_(etcd_members),
        workers_(workers),
        lease_seconds_(lease_seconds),
        extra_daemon_yaml_(std::move(extra_daemon_yaml)),
        worker_yaml_(std::move(worker_yaml)) {
    fs::create_directories(control_);
    for (int i = 0; i < workers; ++i) dirs_.push_back(std::make_unique<TempDir>());
    job_yaml_ = "- name: train\n"
                "  gang: true\n"
                "  autostart: true\n"
                "  command: [/usr/bin/python3, " + YamlQuote(kTrainer) + ", --ckpt-dir, " +
                YamlQuote((shared_.path() / "ckpt-{worker_id}").string()) + ", --control-dir, " +
                YamlQuote(control_.string()) + "]\n"
                "  resume_args: [--resume-step, \"{step}\"]\n"
                "  checkpoint: {dir: " + YamlQuote((shared_.path() / "ckpt-{worker_id}").string()) +
                ", layout: orbax}\n"
                "  progress: {regex: \"^step (\\\\d+)\"" +
                (progress_timeout > 0 ? ", startup_grace_seconds: 5, timeout_seconds: " + std::to_string(progress_timeout)
                                      : std::string()) +
                "}\n"
                "  restart: {backoff_initial_seconds: 0.2, backoff_jitter: 0, max_restarts: 5}\n"
                "  stop: {grace_seconds: 2}\n";
    for (int i = 0; i < workers; ++i) Start(i);
  }

  void Start(int worker) {
    tpuds_.resize(workers_);
    // A replaced tpud is kept until the end: destroying it would end every
    // process it left behind, other workers' attempts included.
    if (tpuds_[worker]) retired_.push_back(std::move(tpuds_[worker]));
    tpuds_[worker] = std::make_unique<TpudProcess>(*dirs_[worker], job_yaml_, DaemonYaml(worker));
  }
  // Another tpud, with its own state under `dir`, configured as `worker`.
  std::unique_ptr<TpudProcess> Extra(const TempDir& dir, int worker) {
    return std::make_unique<TpudProcess>(dir, job_yaml_, DaemonYaml(worker));
  }

  std::string DaemonYaml(int worker) const {
    std::string endpoints;
    for (const std::string& e : etcd_.endpoints()) endpoints += (endpoints.empty() ? "" : ", ") + YamlQuote(e);
    const std::string gce = worker_yaml_ ? worker_yaml_(worker) : "gce_metadata: {enabled: \"false\"}\n";
    const std::string daemon_yaml = gce +
                                    "slice:\n"
                                    "  etcd: {endpoints: [" + endpoints + "], prefix: /it, lease_seconds: " +
                                    std::to_string(lease_seconds_) + "}\n"
                                    "  name: test-slice\n"
                                    "  worker_id: " + std::to_string(worker) + "\n"
                                    "  num_workers: " + std::to_string(workers_) + "\n" + extra_daemon_yaml_;
    return daemon_yaml;
  }

  TpudProcess& operator[](int worker) { return *tpuds_[worker]; }
  // Every worker's directory traversable by others (the socket's own mode
  // and group still decide who may connect).
  void OpenDirs() {
    for (auto& dir : dirs_) fs::permissions(dir->path(), fs::perms(0755));
  }
  // `etcdctl put KEY VALUE` on the slice's etcd; true when it succeeded.
  bool EtcdPut(const std::string& key, const std::string& value) {
    return RunCommand({"etcdctl", "--endpoints=" + etcd_.endpoint(0), "put", key, value}).exit_code == 0;
  }
  int size() const { return workers_; }
  EtcdCluster& etcd() { return etcd_; }
  void Inject(const std::string& kind, int worker) {
    std::ofstream(control_ / (kind + "-w" + std::to_string(worker))) << "1";
  }
  fs::path ckpt(int worker) const { return shared_.path() / ("ckpt-" + std::to_string(worker)); }

  // Every worker's own status of the job.
  std::vector<json> Statuses() {
    std::vector<json> out;
    for (auto& t : tpuds_) out.push_back(t->Status("train"));
    return out;
  }
  // True once every worker runs an attempt of `generation` (gang generation
  // as each worker's tpud reports it) that has made progress.
  bool AllRunning(std::int64_t generation) {
    for (const json& s : Statuses()) {
      if (s["state"] != "running" || s["gang"].is_null() || s["gang"]["phase"] != "starting" ||
          s["gang"]["generation"] != generation || s["last_step"].is_null()) {
        return false;
      }
    }
    return true;
  }
  bool WaitAllRunning(std::int64_t generation, Seconds timeout = Seconds(40)) {
    return WaitFor([&] { return AllRunning(generation); }, timeout);
  }
  std::vector<std::string> LogLines(int worker, const std::string& needle) {
    std::vector<std::string> found;
    for (const std::string& line : Lines(tpuds_[worker]->Logs("train", 100000))) {
      if (line.find(needle) != std::string::npos) found.push_back(line);
    }
    return found;
  }

 private:
  EtcdCluster etcd_;
  int workers_;
  int lease_seconds_;
  std::string extra_daemon_yaml_;
  std::function<std::string(int)> worker_yaml_;
  TempDir shared_;
  fs::path control_ = shared_.path() / "control";
  std::vector<std::unique_ptr<TempDir>> dirs_;
  std::vector<std::unique_ptr<TpudProcess>> retired_;
  std::vector<std::unique_ptr<TpudProcess>> tpuds_;
  std::string job_yaml_;
};

// The step every worker says it resumed from in `generation`'s attempt.
std::set<std::string> ResumeLines(Slice& slice, int generation) {
  std::set<std::string> steps;
  for (int w = 0; w < slice.size(); ++w) {
    for (const std::string& line : slice.LogLines(w, "generation " + std::to_string(generation) + ":")) {
      steps.insert(line.substr(line.find(':') + 2));
    }
  }
  return steps;
}

}  // namespace

TEST_CASE("slice: one worker's crash restarts every worker together from the newest common step",
          "[slice][integration]") {
  Slice slice(3);
  REQUIRE(slice.WaitAllRunning(1));
  REQUIRE(WaitFor([&] { return fs::exists(slice.ckpt(0) / "5") && fs::exists(slice.ckpt(2) / "5"); }, Seconds(20)));

  slice.Inject("crash", 1);
  REQUIRE(slice.WaitAllRunning(2));
  const std::vector<json> statuses = slice.Statuses();
  for (const json& s : statuses) {
    CHECK(s["gang"]["generation"] == 2);
    CHECK(s["gang"]["restarts"] == 1);
    CHECK(s["attempt"] == 2);  // Every worker restarted exactly once: one generation for the incident.
  }
  // Each worker resumed from the same step, one every worker held.
  const std::set<std::string> resumed = ResumeLines(slice, 2);
  REQUIRE(resumed.size() == 1);
  const std::string line = *resumed.begin();
  REQUIRE(line.rfind("resumed from step ", 0) == 0);
  const std::string step = line.substr(std::string("resumed from step ").size());
  CHECK(statuses[0]["gang"]["step"] == std::stoll(step));
  for (int w = 0; w < 3; ++w) CHECK(fs::exists(slice.ckpt(w) / step));

  // Any worker shows the whole gang: one row per worker.
  const json gang = slice[2].Status("train")["gang"];
  REQUIRE(gang["workers"].size() == 3);
  CHECK(WaitFor(
      [&] {
        const json rows = slice[0].Status("train")["gang"]["workers"];
        for (const json& row : rows) {
          if (row["up"] != true || row["state"] != "running" || row["generation"] != 2) return false;
        }
        return true;
      },
      Seconds(10)));
  // Any worker's events show every worker's, by time: worker 1's crash among worker 0's own.
  std::vector<json> events;
  CHECK(WaitFor(
      [&] {
        events = slice[0].Events("train");
        for (const json& e : events) {
          if (e["worker"] == 1 && !e["exit"].is_null() && e["exit"]["code"] == 1) return true;
        }
        return false;
      },
      Seconds(10)));
  std::set<int> event_workers;
  std::int64_t previous_ms = 0;
  for (const json& e : events) {
    if (e["type"] != "transition") continue;
    REQUIRE(e["worker"].is_number());
    event_workers.insert(e["worker"].get<int>());
    CHECK(e["time_unix_ms"].get<std::int64_t>() >= previous_ms);
    previous_ms = e["time_unix_ms"].get<std::int64_t>();
  }
  CHECK(event_workers == std::set<int>{0, 1, 2});
  CHECK(slice[2].Tpuctl({"events", "train"}).out.find(" worker=1 ") != std::string::npos);
  const CommandResult table = slice[0].Tpuctl({"status", "train"});
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("WORKER") != std::string::npos);
  const HttpResult metrics = HttpGet("http://" + slice[0].Info()["metrics_address"].get<std::string>() + "/metrics");
  CHECK(metrics.body.find("tpud_etcd_up 1") != std::string::npos);
  CHECK(metrics.body.find("tpud_gang_generation{job=\"train\"} 2") != std::string::npos);
  CHECK(metrics.body.find("tpud_slice_workers{state=\"up\"} 3") != std::string::npos);
  const CommandResult doctor = slice[1].Tpuctl({"doctor"});
  CHECK(doctor.out.find("\u2713 etcd") != std::string::npos);
  CHECK(doctor.out.find("all 3 workers of test-slice are members") != std::string::npos);
  const CommandResult view = slice[1].Tpuctl({"slice"});
  CHECK(view.exit_code == 0);
  CHECK(view.out.find("test-slice") != std::string::npos);
  CHECK(view.out.find("healthy") != std::string::npos);
}

TEST_CASE("slice: a hang on one worker stops it, and every worker restarts together", "[slice][integration]") {
  Slice slice(2, 1, /*progress_timeout=*/2);
  REQUIRE(slice.WaitAllRunning(1));
  // `tpuctl events -f` on worker 0, following from before the hang.
  TempDir out_dir;
  const fs::path followed = out_dir.path() / "events.txt";
  const pid_t follower = ::fork();
  if (follower == 0) {
    (void)!::freopen(followed.c_str(), "w", stdout);
    ::execl(TPUCTL_BIN, TPUCTL_BIN, "--socket", slice[0].socket().c_str(), "events", "-f", "train",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  KeepChild(follower);
  slice.Inject("hang", 1);
  REQUIRE(slice.WaitAllRunning(2, Seconds(40)));
  const json status = slice[0].Status("train");
  CHECK(status["gang"]["reason"].get<std::string>().find("worker 1: hang") != std::string::npos);
  CHECK(status["gang"]["restarts_by_reason"]["hang"] == 1);
  CHECK(status["attempt"] == 2);
  // The follower printed worker 1's stop for its hang as it happened, and
  // worker 0's own stop for the gang's generation 2.
  const auto followed_line = [&](const std::string& a, const std::string& b) {
    for (const std::string& line : Lines(ReadFile(followed))) {
      if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(WaitFor([&] { return followed_line("running -> stopping attempt=1 worker=1 ", "hang"); }, Seconds(10)));
  CHECK(followed_line("running -> stopping attempt=1 worker=0 ", "gang generation 2"));
  ::kill(follower, SIGTERM);
  ::waitpid(follower, nullptr, 0);
  ReleaseChild(follower);
}

TEST_CASE("slice: a failure that needs a TPU reset resets the slice once, through its queued resource",
          "[slice][integration]") {
  MetadataEmulator metadata;
  KeptChild keep_metadata{metadata.pid()};
  const std::string qr = "projects/p/locations/z/queuedResources/qr";
  CloudTpuEmulator tpu{{"--queued-resource", qr, "--op-delay", "0.3"}};
  KeptChild keep_tpu{tpu.pid()};
  Slice slice(3, 1, 0,
              "tpu:\n"
              "  project: p\n"
              "  zone: z\n"
              "  queued_resource: qr\n"
              "  api_endpoint: " + YamlQuote(tpu.endpoint()) + "\n" +
              "  metadata_host: " + YamlQuote(metadata.host()) + "\n" +
              "  reset: {timeout_seconds: 30, poll_interval_seconds: 0.1}\n");
  REQUIRE(slice.WaitAllRunning(1));
  slice.Inject("deadline", 2);
  REQUIRE(slice.WaitAllRunning(2));
  int resets = 0, node_calls = 0;
  for (const std::string& request : tpu.Requests()) {
    if (request.find("POST /v2/" + qr + ":reset 200") != std::string::npos) ++resets;
    if (request.find("/nodes/") != std::string::npos) ++node_calls;
  }
  CHECK(resets == 1);      // Once per generation, by the leader alone.
  CHECK(node_calls == 0);  // Never nodes.stop on a multi-host slice.
  const json gang = slice[0].Status("train")["gang"];
  CHECK(gang["reason"].get<std::string>().find("deadline_exceeded") != std::string::npos);
}

TEST_CASE("slice: a gang submitted on one worker runs on every worker, and a stop on another stops all",
          "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  TempDir files;
  const fs::path spec = files.WriteFile("extra.yaml", "name: extra\n"
                                                      "gang: true\n"
                                                      "command: [/bin/sleep, \"3600\"]\n");
  const CommandResult started = slice[1].Tpuctl({"start", "-f", spec.string()});
  REQUIRE(started.exit_code == 0);
  for (int w = 0; w < 2; ++w) {
    REQUIRE(slice[w].WaitForState("extra", "running", Seconds(20))["state"] == "running");
  }
  CHECK(slice[0].Status("extra")["gang"]["generation"] == 1);
  REQUIRE(slice[0].Tpuctl({"stop", "extra"}).exit_code == 0);
  for (int w = 0; w < 2; ++w) {
    CHECK(slice[w].WaitForState("extra", "stopped", Seconds(20))["state"] == "stopped");
  }
  CHECK(slice[1].Status("train")["state"] == "running");  // The other gang is untouched.

  // Resubmitted with a new command on the other worker: every worker runs the new one.
  files.WriteFile("extra.yaml", "name: extra\n"
                                "gang: true\n"
                                "command: [/bin/sleep, \"3601\"]\n");
  const CommandResult again = slice[0].Tpuctl({"start", "-f", spec.string()});
  REQUIRE(again.exit_code == 0);
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w);
    const json status = slice[w].WaitForState("extra", "running", Seconds(20));
    REQUIRE(status["state"] == "running");
    CHECK(status["command"] == json::array({"/bin/sleep", "3601"}));
  }
}

TEST_CASE("slice: a second tpud claiming a worker's id does not join, and the gang runs on untouched",
          "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  const json before = slice[1].Status("train");
  TempDir dir;
  std::unique_ptr<TpudProcess> duplicate = slice.Extra(dir, 1);
  json view;
  REQUIRE(WaitFor(
      [&] {
        const CommandResult result = duplicate->Tpuctl({"slice", "--json"});
        view = json::parse(result.out, nullptr, false);
        return !view.is_discarded() && !view["member_conflict"].get<std::string>().empty();
      },
      Seconds(10)));
  const std::string conflict = view["member_conflict"];
  CHECK(conflict.find("worker 1 is already held") != std::string::npos);
  CHECK(conflict.find("pid " + std::to_string(slice[1].pid())) != std::string::npos);
  const CommandResult doctor = duplicate->Tpuctl({"doctor"});
  CHECK(doctor.exit_code != 0);
  CHECK(doctor.out.find("already held") != std::string::npos);
  CHECK(duplicate->Tpuctl({"slice"}).out.find("NOT JOINED") != std::string::npos);
  CHECK(duplicate->StderrText().find("worker 1 is already held") != std::string::npos);

  // Nothing of the gang moved, and the duplicate started no attempt.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  CHECK(slice.AllRunning(1));
  CHECK(slice[1].Status("train")["attempt"] == before["attempt"]);
  CHECK(slice[1].Status("train")["pid"] == before["pid"]);
  CHECK(duplicate->Status("train")["pid"].is_null());
  const json members = json::parse(slice[0].Tpuctl({"slice", "--json"}).out)["members"];
  REQUIRE(members.size() == 2);
  CHECK(members[1]["up"] == true);
  CHECK(slice[0].Tpuctl({"doctor"}).out.find("all 2 workers of test-slice are members") != std::string::npos);
}

TEST_CASE("slice: a gang job on a tpud without a slice section is refused with the reason", "[slice][integration]") {
  TempDir dir;
  TpudProcess tpud(dir, "");
  const fs::path spec = dir.WriteFile("gang.yaml", "name: g\ngang: true\ncommand: [/bin/true]\n");
  const CommandResult result = tpud.Tpuctl({"start", "-f", spec.string()});
  CHECK(result.exit_code != 0);
  CHECK(result.err.find("no slice: section") != std::string::npos);
  CHECK(tpud.Tpuctl({"status", "g"}).exit_code != 0);  // Nothing was added.
}

TEST_CASE("slice: a maintenance event on one worker stops the gang, which restarts once the event is over",
          "[slice][integration]") {
  std::vector<std::unique_ptr<MetadataEmulator>> metadata;
  std::vector<std::unique_ptr<KeptChild>> kept;
  for (int w = 0; w < 2; ++w) {
    metadata.push_back(std::make_unique<MetadataEmulator>());
    kept.push_back(std::make_unique<KeptChild>(metadata.back()->pid()));
  }
  Slice slice(2, 1, 0, "", [&](int w) {
    return "gce_metadata: {enabled: \"true\", host: " + YamlQuote(metadata[w]->host()) + "}\n";
  });
  REQUIRE(slice.WaitAllRunning(1));
  metadata[1]->Control("set?key=instance/maintenance-event&value=TERMINATE_ON_HOST_MAINTENANCE");
  // Every worker stops; worker 1 holds the restart while its VM is in maintenance.
  REQUIRE(WaitFor([&] { return slice[0].Status("train")["gang"]["generation"] == 2; }, Seconds(20)));
  REQUIRE(slice[1].WaitForState("train", "backoff", Seconds(20))["state"] == "backoff");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(slice[0].Status("train")["state"] == "backoff");
  CHECK(slice[1].Status("train")["reason"].get<std::string>().find("maintenance event to end") !=
        std::string::npos);
  metadata[1]->Control("set?key=instance/maintenance-event&value=NONE");
  REQUIRE(slice.WaitAllRunning(2));
  CHECK(slice[0].Status("train")["gang"]["restarts"] == 0);  // Maintenance is not counted.
}

TEST_CASE("slice: a stop sticks on its worker even with etcd down, and reaches the others once etcd is back",
          "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  slice.etcd().Kill(0);
  REQUIRE(slice[0].Tpuctl({"stop", "train"}).exit_code == 0);
  CHECK(slice[0].WaitForState("train", "stopped", Seconds(15))["state"] == "stopped");
  CHECK(slice[1].Status("train")["state"] == "running");  // It learns of the stop through etcd.
  slice.etcd().Restart(0);
  CHECK(slice[1].WaitForState("train", "stopped", Seconds(30))["state"] == "stopped");
  CHECK(slice[0].Status("train")["gang"]["phase"] == "stopped");
}

TEST_CASE("slice: a stop made while etcd is down sticks through a tpud restart, and reaches the gang",
          "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  slice.etcd().Kill(0);
  REQUIRE(slice[0].Tpuctl({"stop", "train"}).exit_code == 0);
  REQUIRE(slice[0].WaitForState("train", "stopped", Seconds(15))["state"] == "stopped");
  REQUIRE(slice[0].Shutdown() == 0);  // The proposal never reached etcd.
  const std::int64_t restarted_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count();
  slice.Start(0);
  slice.etcd().Restart(0);
  CHECK(slice[1].WaitForState("train", "stopped", Seconds(30))["state"] == "stopped");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const json status = slice[0].Status("train");
  INFO(status.dump());
  CHECK(status["state"] == "stopped");
  CHECK(status["gang"]["phase"] == "stopped");
  for (const json& e : slice[0].Events("train")) {  // Never started again here.
    if (e["time_unix_ms"].get<std::int64_t>() > restarted_ms) CHECK(e["to"] != "starting");
  }
  CHECK_THAT(slice[0].StderrText(), Catch::Matchers::Contains("proposing again what worker 0 proposed"));
}

TEST_CASE("slice: after etcd loses its data, a failure still restarts the gang and a stop still reaches it",
          "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  slice.etcd().Wipe(0);  // Empty, its revisions back at 1: no member, no lease, no generation.
  std::this_thread::sleep_for(std::chrono::seconds(5));  // Leases found lost, members claim their keys again.
  for (const json& s : slice.Statuses()) CHECK(s["attempt"] == 1);  // Training went on untouched.
  slice.Inject("crash", 0);
  REQUIRE(slice.WaitAllRunning(2, Seconds(60)));  // Not moot: generation 2 from worker 0's 1.
  CHECK_THAT(slice[0].StderrText(), Catch::Matchers::Contains("etcd lost data"));
  REQUIRE(RunCommand({"etcdctl", "--endpoints=" + slice.etcd().endpoint(0), "del", "--prefix", "/it/"}).exit_code == 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  REQUIRE(slice[1].Tpuctl({"stop", "train"}).exit_code == 0);
  for (int w = 0; w < 2; ++w) CHECK(slice[w].WaitForState("train", "stopped", Seconds(30))["state"] == "stopped");
}

TEST_CASE("slice: pausing etcd past every lease leaves a healthy gang alone", "[slice][integration]") {
  // 5 s leases: a rejoin after the pause must fit in one lease even under a
  // sanitizer on a loaded CI machine (3 s did not, there).
  Slice slice(3, 1, 0, "", nullptr, /*lease_seconds=*/5);
  REQUIRE(slice.WaitAllRunning(1));
  for (int round = 0; round < 2; ++round) {
    // Every lease runs out during the pause; etcd revokes them all the
    // moment it resumes, before any keepalive gets through.
    slice.etcd().Pause(0);
    std::this_thread::sleep_for(std::chrono::seconds(8));
    slice.etcd().Resume(0);
    std::this_thread::sleep_for(std::chrono::seconds(10));  // Two leases' worth for a wrong verdict to show.
  }
  int w = 0;
  for (const json& s : slice.Statuses()) {
    INFO(s.dump());
    INFO("worker " << w << "'s tpud logged:\n" << SliceLines(slice[w].StderrText()));
    CHECK(s["state"] == "running");
    CHECK(s["attempt"] == 1);
    CHECK(s["gang"]["generation"] == 1);
    ++w;
  }
}

TEST_CASE("slice: a deterministic failure on one worker fails the gang on every worker", "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  slice.Inject("oom", 0);
  for (int w = 0; w < 2; ++w) {
    const json status = slice[w].WaitForState("train", "failed", Seconds(30));
    CHECK(status["state"] == "failed");
    CHECK(status["gang"]["phase"] == "failed");
    CHECK(status["attempt"] == 1);  // Never restarted.
  }
  CHECK(slice[1].Status("train")["gang"]["reason"].get<std::string>().find("hbm_oom") != std::string::npos);
}

TEST_CASE("slice: two workers failing at once make one generation", "[slice][integration]") {
  Slice slice(3);
  REQUIRE(slice.WaitAllRunning(1));
  const int first = slice[0].Status("train")["pid"];
  const int second = slice[2].Status("train")["pid"];
  REQUIRE(kill(first, SIGKILL) == 0);  // Both trainers die within microseconds.
  REQUIRE(kill(second, SIGKILL) == 0);
  REQUIRE(slice.WaitAllRunning(2));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (const json& s : slice.Statuses()) {
    CHECK(s["gang"]["generation"] == 2);
    CHECK(s["attempt"] == 2);
  }
}

TEST_CASE("slice: tpud SIGKILLed on one worker rejoins, and nothing restarts", "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  const int pid = slice[1].Status("train")["pid"];
  REQUIRE(kill(slice[1].pid(), SIGKILL) == 0);
  slice[1].Shutdown(Seconds(5));
  slice.Start(1);  // Within the lease: the same member, the same generation.
  REQUIRE(slice[1].WaitForState("train", "running", Seconds(15))["state"] == "running");
  std::this_thread::sleep_for(std::chrono::seconds(5));  // Longer than the lease.
  for (const json& s : slice.Statuses()) {
    CHECK(s["gang"]["generation"] == 1);
    CHECK(s["attempt"] == 1);
  }
  CHECK(slice[1].Status("train")["pid"] == pid);  // The trainer kept running under its shim.
}

TEST_CASE("slice: a tpud stopping its jobs on exit leaves the gang, which restarts once it is back",
          "[slice][integration]") {
  Slice slice(2);  // The harness gives every tpud stop_jobs_on_exit: true.
  REQUIRE(slice.WaitAllRunning(1));
  const int trainer = slice[1].Status("train")["pid"];
  REQUIRE(slice[1].Shutdown(Seconds(20)) == 0);
  CHECK(kill(trainer, 0) != 0);  // Its attempt was stopped before it exited.
  // Worker 0 stops too and waits for worker 1: the gang is stopping, not stopped for good.
  REQUIRE(WaitFor([&] { return slice[0].Status("train")["gang"]["generation"] == 2; }, Seconds(20)));
  const json waiting = slice[0].WaitForState("train", "backoff", Seconds(20));
  CHECK(waiting["state"] == "backoff");
  CHECK(waiting["gang"]["phase"] == "stopping");
  CHECK(waiting["gang"]["reason"] == "worker 1 left: tpud received SIGTERM");
  slice.Start(1);
  REQUIRE(slice.WaitAllRunning(2));
  CHECK(slice[0].Status("train")["gang"]["restarts"] == 0);  // Not the job's fault: not counted.
}

TEST_CASE("slice: a lost worker stops the others, which resume together once it is back", "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  const int trainer = slice[1].Status("train")["pid"];
  REQUIRE(kill(slice[1].pid(), SIGKILL) == 0);  // Its tpud, then its attempt: the VM is gone.
  slice[1].Shutdown(Seconds(5));
  kill(-trainer, SIGKILL);
  // Worker 0 stops and waits for it.
  REQUIRE(WaitFor([&] { return slice[0].Status("train")["gang"]["generation"] == 2; }, Seconds(20)));
  const json waiting = slice[0].WaitForState("train", "backoff", Seconds(20));
  CHECK(waiting["state"] == "backoff");
  CHECK(waiting["gang"]["reason"] == "worker 1 lost (its tpud's lease expired)");
  slice.Start(1);
  REQUIRE(slice.WaitAllRunning(2));
  CHECK(slice[0].Status("train")["gang"]["restarts"] == 0);  // A lost VM is not counted.
}

TEST_CASE("slice: the etcd leader killed in a 3-member cluster restarts nothing", "[slice][integration]") {
  Slice slice(2, /*etcd_members=*/3);
  REQUIRE(slice.WaitAllRunning(1));
  slice.etcd().Kill(slice.etcd().Leader());
  std::this_thread::sleep_for(std::chrono::seconds(6));
  for (const json& s : slice.Statuses()) {
    CHECK(s["state"] == "running");
    CHECK(s["gang"]["generation"] == 1);
    CHECK(s["attempt"] == 1);
  }
  // And the gang still acts: a crash restarts everyone.
  slice.Inject("crash", 1);
  REQUIRE(slice.WaitAllRunning(2));
}

TEST_CASE("slice: etcd down leaves training untouched, and a failure in the outage resolves once it is back",
          "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  slice.etcd().Kill(0);
  std::this_thread::sleep_for(std::chrono::seconds(30));  // Ten leases' worth.
  for (const json& s : slice.Statuses()) {
    CHECK(s["state"] == "running");
    CHECK(s["attempt"] == 1);
  }
  slice.Inject("crash", 0);
  REQUIRE(slice[0].WaitForState("train", "backoff", Seconds(10))["state"] == "backoff");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(slice[1].Status("train")["state"] == "running");  // No generation without etcd.
  const CommandResult doctor = slice[1].Tpuctl({"doctor"}, Seconds(30));
  CHECK(doctor.exit_code == 1);
  CHECK(doctor.out.find("\u2717 etcd") != std::string::npos);
  // What status shows of the gang is as last seen, and it says so.
  const CommandResult listed = slice[1].Tpuctl({"status"});
  INFO(listed.out);
  CHECK(listed.out.find("as last seen: etcd unreachable since") != std::string::npos);
  const CommandResult one = slice[1].Tpuctl({"status", "train"});
  INFO(one.out);
  CHECK(one.out.find("unreachable since") != std::string::npos);
  CHECK_FALSE(slice[1].Status("train")["gang"]["etcd_down_since"].is_null());
  slice.etcd().Restart(0);
  REQUIRE(slice.WaitAllRunning(2, Seconds(60)));
  CHECK(slice[1].Status("train")["gang"]["etcd_down_since"].is_null());
}

TEST_CASE("slice: workers that disagree on num_workers say so on every worker and in doctor", "[slice][integration]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  TempDir extra_dir;
  std::string yaml = slice.DaemonYaml(2);
  const std::size_t at = yaml.find("num_workers: 2");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 14, "num_workers: 3");
  TpudProcess third(extra_dir, "", yaml);
  for (TpudProcess* tpud : {&slice[0], &third}) {
    REQUIRE(WaitFor([&] { return tpud->Tpuctl({"slice"}).out.find("CONFLICT") != std::string::npos; }, Seconds(20)));
    const CommandResult shown = tpud->Tpuctl({"slice"});
    INFO(shown.out);
    CHECK(shown.out.find("slice.num_workers 3") != std::string::npos);
    const CommandResult doctor = tpud->Tpuctl({"doctor"}, Seconds(30));
    INFO(doctor.out);
    CHECK(doctor.exit_code == 1);
    CHECK(doctor.out.find("same slice.num_workers") != std::string::npos);
  }
  CHECK(slice[1].Status("train")["gang"]["config_conflict"].get<std::string>().find("worker 2") != std::string::npos);
}

TEST_CASE("slice: a gang spec a socket-group member submits runs as that member on every worker, never as root",
          "[slice][integration][access]") {
  if (!CanRunAsNobody()) return;
  Slice slice(2, 1, 0, "socket_group: users\n");
  slice.OpenDirs();
  TempDir files;
  fs::permissions(files.path(), fs::perms(0755));
  const fs::path spec = files.WriteFile("member.yaml", "name: member\n"
                                                       "gang: true\n"
                                                       "command: [/bin/sleep, \"3600\"]\n");
  fs::permissions(spec, fs::perms(0644));
  const CommandResult started = TpuctlAsNobody(slice[0], "users", {"start", "-f", spec.string()});
  INFO(started.err);
  REQUIRE(started.exit_code == 0);
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w);
    const json status = slice[w].WaitForState("member", "running", Seconds(20));
    REQUIRE(status["state"] == "running");
    CHECK(ProcessUid(status["pid"].get<int>()) == static_cast<long>(NobodyUid()));
  }
}

TEST_CASE("slice: a gang spec in etcd that names no user is refused on every worker, not run as tpud",
          "[slice][integration][access]") {
  Slice slice(2);
  REQUIRE(slice.WaitAllRunning(1));
  REQUIRE(slice.EtcdPut("/it/slices/test-slice/gangs/raw/spec",
                        "name: raw\ngang: true\ncommand: [/bin/sleep, \"3600\"]\n"));
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w);
    CHECK(WaitFor([&] { return slice[w].StderrText().find("gang spec raw from etcd refused") != std::string::npos; },
                  Seconds(10)));
    CHECK(slice[w].StderrText().find("names no user and group") != std::string::npos);
    CHECK(slice[w].Tpuctl({"status", "raw"}).exit_code != 0);
  }
}

TEST_CASE("slice: a duplicate worker id never takes over a killed tpud's id at once, and a tpud that is not a "
          "member stops the gang attempt it re-attached",
          "[slice][integration]") {
  // A lease long enough that the duplicate's first claim surely meets the
  // dead holder's key, even under a sanitizer.
  Slice slice(2, 1, 0, "", nullptr, /*lease_seconds=*/10);
  REQUIRE(slice.WaitAllRunning(1));
  const int trainer = slice[1].Status("train")["pid"];
  REQUIRE(kill(slice[1].pid(), SIGKILL) == 0);  // Its trainer lives on under its shim.
  slice[1].Shutdown(Seconds(5));
  // Another tpud (its own state_dir) on this host, configured as worker 1:
  // the dead holder's key is not its predecessor's, so it waits for the lease.
  TempDir dir;
  std::unique_ptr<TpudProcess> duplicate = slice.Extra(dir, 1);
  CHECK(WaitFor([&] { return duplicate->StderrText().find("worker 1 is already held") != std::string::npos; },
                Seconds(5)));
  // Once the lease lapsed the duplicate holds worker 1. The first tpud comes
  // back: not a member, it stops the trainer it re-attached, and says why.
  REQUIRE(WaitFor([&] { return duplicate->StderrText().find("worker 1 of 2 joined") != std::string::npos; },
                  Seconds(30)));
  // The fence: the first tpud's attempt is recorded in etcd and still runs,
  // so the duplicate starts no second worker-1 trainer beside it.
  REQUIRE(WaitFor([&] {
    return duplicate->Status("train")["reason"].get<std::string>().find("is recorded as running") != std::string::npos;
  }, Seconds(30)));
  CHECK(duplicate->Status("train")["pid"].is_null());
  CHECK(Alive(trainer));
  slice.Start(1);
  CHECK(WaitFor([&] { return !Alive(trainer); }, Seconds(20)));
  const json status = slice[1].Status("train");
  CHECK(status["state"] != "running");
  CHECK_THAT(status["reason"].get<std::string>(), Catch::Matchers::Contains("not a member of the slice"));
  CHECK(slice[1].Tpuctl({"slice"}).out.find("NOT JOINED") != std::string::npos);
  // Its trainer gone and its record cleared, the duplicate's worker 1 runs.
  CHECK(duplicate->WaitForState("train", "running", Seconds(40))["state"] == "running");
}

}  // namespace tpud::testing
