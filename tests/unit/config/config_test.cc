#include "daemon/config/config.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using absl::StrCat;
using Catch::Matchers::StartsWith;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes tpud.yaml into `dir` and loads it; the load must succeed.
DaemonConfig Load(const TempDir& dir, const std::string& yaml) {
  absl::StatusOr<DaemonConfig> config = LoadDaemonConfig(dir.File("tpud.yaml", yaml));
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

// Writes tpud.yaml into `dir` and loads it; the load must fail with InvalidArgument.
std::string LoadError(const TempDir& dir, const std::string& yaml) {
  absl::StatusOr<DaemonConfig> config = LoadDaemonConfig(dir.File("tpud.yaml", yaml));
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

constexpr char kFullConfig[] = R"(socket: /run/t/t.sock
state_dir: /var/lib/t
log_dir: /var/log/t
metrics:
  listen: 0.0.0.0:0
jobs:
  - name: digits-v2.1
    command: [python3, train.py, --steps, 100]
    working_dir: /opt/digits
    env: {STEPS: 100, VERBOSE: true, NAME: x}
    autostart: yes
    start_seconds: 2.5
    checkpoint: {dir: /ckpt/digits, layout: pattern, pattern: 'step_(\d+)'}
    resume_args: [--resume, "{checkpoint}", --step, "{step}"]
    restart:
      max_restarts: 3
      backoff_initial_seconds: 0.5
      backoff_max_seconds: 60
      backoff_jitter: 0
      reset_after_seconds: 600
    stop: {grace_seconds: 5, signals: [INT, SIGTERM, 9]}
    log: {max_bytes: 10MiB, backups: 0}
)";

TEST_CASE("Config: a full config parses with every field right", "[config]") {
  TempDir dir;
  const DaemonConfig config = Load(dir, kFullConfig);
  CHECK(config.config_path == dir.path() / "tpud.yaml");
  CHECK(config.socket == "/run/t/t.sock");
  CHECK(config.state_dir == "/var/lib/t");
  CHECK(config.log_dir == "/var/log/t");
  CHECK(config.metrics.listen == "0.0.0.0:0");
  CHECK(config.jobs_dir.empty());
  REQUIRE(config.jobs.size() == 1);
  const JobSpec& job = config.jobs[0];
  CHECK(job.name == "digits-v2.1");
  CHECK(job.command == std::vector<std::string>{"python3", "train.py", "--steps", "100"});
  CHECK(job.working_dir == "/opt/digits");
  CHECK(job.env == std::map<std::string, std::string>{{"STEPS", "100"}, {"VERBOSE", "true"}, {"NAME", "x"}});
  CHECK(job.autostart);
  CHECK(job.start_seconds == 2.5);
  CHECK(job.checkpoint.dir == "/ckpt/digits");
  CHECK(job.checkpoint.layout == CheckpointLayout::kPattern);
  CHECK(job.checkpoint.pattern == R"(step_(\d+))");
  CHECK(job.resume_args == std::vector<std::string>{"--resume", "{checkpoint}", "--step", "{step}"});
  CHECK(job.restart.max_restarts == 3);
  CHECK(job.restart.backoff_initial_seconds == 0.5);
  CHECK(job.restart.backoff_max_seconds == 60);
  CHECK(job.restart.backoff_jitter == 0);
  CHECK(job.restart.reset_after_seconds == 600);
  CHECK(job.stop.grace_seconds == 5);
  CHECK(job.stop.signals == std::vector<int>{2, 15, 9});
  CHECK(job.log.max_bytes == 10u << 20);
  CHECK(job.log.backups == 0);
  CHECK(job.origin == StrCat("config:", (dir.path() / "tpud.yaml").string()));
}

TEST_CASE("Config: absent keys take the documented defaults", "[config]") {
  TempDir dir;
  const DaemonConfig empty = Load(dir, "# nothing but a comment\n");
  CHECK(empty.socket == "/run/tpud/tpud.sock");
  CHECK(empty.state_dir == "/var/lib/tpud");
  CHECK(empty.log_dir == "/var/log/tpud");
  CHECK(empty.metrics.listen == "127.0.0.1:9464");
  CHECK(empty.jobs_dir.empty());
  CHECK(empty.jobs.empty());

  const DaemonConfig config = Load(dir, "jobs:\n  - {name: a, command: [run]}\n");
  REQUIRE(config.jobs.size() == 1);
  const JobSpec& job = config.jobs[0];
  CHECK(job.working_dir.empty());
  CHECK(job.env.empty());
  CHECK_FALSE(job.autostart);
  CHECK(job.start_seconds == 1);
  CHECK(job.checkpoint.dir.empty());
  CHECK(job.checkpoint.layout == CheckpointLayout::kAuto);
  CHECK(job.resume_args.empty());
  CHECK(job.restart.max_restarts == 10);
  CHECK(job.restart.backoff_initial_seconds == 1);
  CHECK(job.restart.backoff_max_seconds == 300);
  CHECK(job.restart.backoff_jitter == 0.2);
  CHECK(job.restart.reset_after_seconds == 3600);
  CHECK(job.stop.grace_seconds == 30);
  CHECK(job.stop.signals == std::vector<int>{2, 15, 3, 9});  // SIGINT, SIGTERM, SIGQUIT, SIGKILL.
  CHECK(job.log.max_bytes == 50u << 20);
  CHECK(job.log.backups == 10);
}

TEST_CASE("Config: unknown key names file, line and key", "[config]") {
  TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  CHECK_THAT(LoadError(dir, "jobs:\n  - name: a\n    command: [run]\n    restrat: {max_restarts: 1}\n"),
             StartsWith(StrCat(file,
                               ":4: jobs[0].restrat: unknown key, did you mean restart? (known: name, "
                               "command, working_dir,")));
  CHECK_THAT(LoadError(dir, "log_dir: /l\nsockt: /s\n"),  // More keys follow; each feature adds its own.
             StartsWith(StrCat(file,
                               ":2: sockt: unknown key, did you mean socket? (known: socket, state_dir, "
                               "log_dir, metrics, jobs_dir, jobs, gce_metadata, ")));
  CHECK(LoadError(dir, "metrics:\n  port: 1\n") ==
        StrCat(file, ":2: metrics.port: unknown key (known: listen)"));
  CHECK(LoadError(dir, "socket: /a\nsocket: /b\n") == StrCat(file, ":2: socket: duplicate key"));
}

// One job under "jobs:" (line 1) with a bad value, the line that holds it and the message.
struct BadJobCase {
  const char* yaml;
  int line;
  const char* message;
};

constexpr BadJobCase kBadJobs[] = {
    {"- name: a\n  command: [run]\n  restart:\n    max_restarts: -1\n", 5,
     "jobs[0].restart.max_restarts: must be >= 0, got -1"},
    {"- name: a\n  command: [run]\n  restart:\n    max_restarts: ten\n", 5,
     "jobs[0].restart.max_restarts: expected an integer, got \"ten\""},
    {"- name: Bad\n  command: [run]\n", 2, "jobs[0].name: must match [a-z0-9][a-z0-9_.-]{0,62}, got \"Bad\""},
    {"- command: [run]\n", 2, "jobs[0].name: required"},
    {"- name: a\n  command: python train.py\n", 3,
     "jobs[0].command: expected a list of strings, got \"python train.py\""},
    {"- name: a\n  command: []\n", 3, "jobs[0].command: required: a non-empty list of strings (argv)"},
    {"- name: a\n  command:\n    - \"\"\n    - x\n", 4, "jobs[0].command[0]: must not be empty"},
    {"- name: a\n  command: [run]\n  start_seconds: -0.5\n", 4,
     "jobs[0].start_seconds: must be >= 0, got -0.5"},
    {"- name: a\n  command: [run]\n  stop: {grace_seconds: inf}\n", 4,
     "jobs[0].stop.grace_seconds: must be finite, got inf"},
    {"- name: a\n  command: [run]\n  restart:\n    backoff_initial_seconds: 10\n    backoff_max_seconds: 5\n",
     6, "jobs[0].restart.backoff_max_seconds: must be >= restart.backoff_initial_seconds (10), got 5"},
    {"- name: a\n  command: [run]\n  restart: {backoff_jitter: 1.5}\n", 4,
     "jobs[0].restart.backoff_jitter: must be between 0 and 1, got 1.5"},
    {"- name: a\n  command: [run]\n  restart: 5\n", 4, "jobs[0].restart: expected a mapping, got \"5\""},
    {"- name: a\n  command: [run]\n  autostart: maybe\n", 4,
     "jobs[0].autostart: expected true or false, got \"maybe\""},
    {"- name: a\n  command: [run]\n  env:\n    A: [1]\n", 5, "jobs[0].env.A: expected a string, got a list"},
    {"- name: a\n  command: [run]\n  checkpoint: {dir: /c, layout: pattern}\n", 4,
     "jobs[0].checkpoint.pattern: required with layout pattern"},
    {"- name: a\n  command: [run]\n  checkpoint: {dir: /c, layout: pattern, pattern: 'ckpt-\\d+'}\n", 4,
     "jobs[0].checkpoint.pattern: needs a capture group for the step"},
    {"- name: a\n  command: [run]\n  checkpoint: {dir: /c, layout: pattern, pattern: 'ckpt-(\\d+'}\n", 4,
     "jobs[0].checkpoint.pattern: invalid RE2 pattern: missing )"},
    {"- name: a\n  command: [run]\n  checkpoint:\n    dir: /c\n    pattern: 'x(\\d)'\n", 6,
     "jobs[0].checkpoint.pattern: only allowed with layout pattern, got layout auto"},
    {"- name: a\n  command: [run]\n  checkpoint:\n    dir: /c\n    layout: zarr\n", 6,
     "jobs[0].checkpoint.layout: unknown layout \"zarr\" (known: auto, tensorflow, orbax, huggingface, "
     "torch_dcp, lightning, pattern)"},
    {"- name: a\n  command: [run]\n  checkpoint: {layout: orbax}\n", 4,
     "jobs[0].checkpoint.dir: required with layout orbax"},
    {"- name: a\n  command: [run]\n  stop:\n    signals:\n      - TERM\n      - SIGFOO\n", 7,
     "jobs[0].stop.signals[1]: unknown signal \"SIGFOO\" (expected e.g. SIGTERM, TERM or 15)"},
    {"- name: a\n  command: [run]\n  stop: {signals: []}\n", 4, "jobs[0].stop.signals: must not be empty"},
    {"- name: a\n  command: [run]\n  log: {backups: -1}\n", 4, "jobs[0].log.backups: must be between 0 and 1000, got -1"},
    {"- name: a\n  command: [run]\n  log: {backups: 2000000000}\n", 4,
     "jobs[0].log.backups: must be between 0 and 1000, got 2000000000"},
    {"- name: a\n  command: [run]\n  log: {max_bytes: 200}\n", 4,
     "jobs[0].log.max_bytes: must be at least 65536 (64KiB), got 200"},
    {"- name: a\n  command: [run]\n  stop: {grace_seconds: 1e10}\n", 4,
     "jobs[0].stop.grace_seconds: must be at most 2592000 (30 days), got 1e+10"},
    {"- name: a\n  command: [run]\n  restart: {backoff_initial_seconds: 1e12, backoff_max_seconds: 1e12}\n", 4,
     "jobs[0].restart.backoff_initial_seconds: must be at most 2592000 (30 days), got 1e+12"},
    {"- name: a\n  command: [run]\n  progress: {timeout_seconds: 1e300}\n", 4,
     "jobs[0].progress.timeout_seconds: must be at most 2592000 (30 days), got 1e+300"},
    {"- name: a\n  command: [run]\n  log:\n    max_bytes: lots\n", 5,
     "jobs[0].log.max_bytes: expected a size in bytes such as 52428800, \"50MB\" or \"10MiB\", got \"lots\""},
    {"- name: a\n  name: b\n  command: [run]\n", 3, "jobs[0].name: duplicate key"},
};

TEST_CASE("Config: each bad value names file, line and key", "[config]") {
  TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  for (const BadJobCase& bad : kBadJobs) {
    INFO(bad.yaml);
    CHECK_THAT(LoadError(dir, StrCat("jobs:\n", bad.yaml)),
               StartsWith(StrCat(file, ":", bad.line, ": ", bad.message)));
  }
}

TEST_CASE("Config: bad top-level values and YAML syntax name file and line", "[config]") {
  TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  CHECK_THAT(LoadError(dir, "socket: /s\njobs: [\n  {name: a\n"),
             StartsWith(StrCat(file, ":4: invalid YAML: ")));
  CHECK(LoadError(dir, "- a\n- b\n") == StrCat(file, ":1: expected a mapping, got a list"));
  CHECK(LoadError(dir, "jobs: {name: a}\n") ==
        StrCat(file, ":1: jobs: expected a list of job specs, got a mapping"));
  CHECK(LoadError(dir, "log_dir: /l\nsocket: \"\"\n") == StrCat(file, ":2: socket: must not be empty"));
  CHECK_THAT(LoadError(dir, "metrics:\n  listen: localhost\n"),
             StartsWith(StrCat(file, ":2: metrics.listen: expected host:port")));
  CHECK_THAT(LoadError(dir, "a: 1\n---\nb: 2\n"),
             StartsWith(StrCat(file, ":3: expected one YAML document, found 2")));
}

TEST_CASE("Config: a ',' outside any flow collection is an error, not a parse that never ends", "[config]") {
  // yaml-cpp 0.7's LoadAll loops for ever on these (found by tests/fuzz/fuzz_config).
  for (const char* text : {",", "\"s\",", ", x", "name: a\ncommand: [a]\n---\n,"}) {
    INFO(text);
    absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "r", "/");
    REQUIRE_FALSE(spec.ok());
    CHECK_THAT(std::string(spec.status().message()), StartsWith("r:"));
  }
}

TEST_CASE("Config: a missing config file is NotFound", "[config]") {
  TempDir dir;
  absl::StatusOr<DaemonConfig> config = LoadDaemonConfig(dir.path() / "absent.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(config.status().message()), StartsWith((dir.path() / "absent.yaml").string()));
}

TEST_CASE("Config: jobs_dir files load after inline jobs, in file name order", "[config]") {
  TempDir dir;
  dir.File("jobs.d/b.yml", "name: b\ncommand: [b]\nworking_dir: work\n");
  dir.File("jobs.d/a.yaml", "name: a\ncommand: [a]\n");
  dir.File("jobs.d/c.yaml.disabled", "name: c\ncommand: [c]\n");
  dir.File("jobs.d/notes.txt", "not yaml: [");
  const DaemonConfig config = Load(dir, "jobs_dir: jobs.d\njobs:\n  - {name: inline, command: [i]}\n");
  CHECK(config.jobs_dir == dir.path() / "jobs.d");
  REQUIRE(config.jobs.size() == 3);
  CHECK(config.jobs[0].name == "inline");
  CHECK(config.jobs[0].origin == StrCat("config:", (dir.path() / "tpud.yaml").string()));
  CHECK(config.jobs[1].name == "a");
  CHECK(config.jobs[1].origin == StrCat("config:", (dir.path() / "jobs.d/a.yaml").string()));
  CHECK(config.jobs[2].name == "b");
  CHECK(config.jobs[2].working_dir == dir.path() / "jobs.d/work");
}

TEST_CASE("Config: errors in a jobs_dir file name that file and keys from its top", "[config]") {
  TempDir dir;
  const fs::path job =
      dir.File("jobs.d/train.yaml", "name: train\ncommand: [t]\nrestart:\n  max_restarts: -1\n");
  CHECK(LoadError(dir, "jobs_dir: jobs.d\n") ==
        StrCat(job.string(), ":4: restart.max_restarts: must be >= 0, got -1"));
  dir.File("jobs.d/train.yaml", "name: train\ncomand: [t]\n");
  CHECK_THAT(LoadError(dir, "jobs_dir: jobs.d\n"),
             StartsWith(StrCat(job.string(), ":2: comand: unknown key, did you mean command?")));
}

TEST_CASE("Config: duplicate job names across inline jobs and jobs_dir name both places", "[config]") {
  TempDir dir;
  const fs::path job = dir.File("jobs.d/a.yaml", "# the same name again\nname: train\ncommand: [t]\n");
  const std::string file = (dir.path() / "tpud.yaml").string();
  CHECK(LoadError(dir, "jobs_dir: jobs.d\njobs:\n  - name: train\n    command: [t]\n") ==
        StrCat(job.string(), ":2: name: duplicate job name \"train\", first defined at ", file, ":3"));
  CHECK(LoadError(dir, "jobs:\n  - {name: x, command: [t]}\n  - {name: x, command: [u]}\n") ==
        StrCat(file, ":3: jobs[1].name: duplicate job name \"x\", first defined at ", file, ":2"));
}

TEST_CASE("Config: an explicitly set jobs_dir that does not exist is an error naming the key", "[config]") {
  TempDir dir;
  CHECK(LoadError(dir, "socket: /s\njobs_dir: missing.d\n") ==
        StrCat((dir.path() / "tpud.yaml").string(),
               ":2: jobs_dir: no such directory: ", (dir.path() / "missing.d").string()));
}

TEST_CASE("Config: relative paths resolve against the config file's directory", "[config]") {
  TempDir dir;
  fs::create_directories(dir.path() / "jobs.d");
  const DaemonConfig config =
      Load(dir,
           "socket: run/tpud.sock\nstate_dir: ./state\nlog_dir: ../logs\njobs_dir: jobs.d\n"
           "jobs:\n  - name: a\n    command: [./train.sh]\n    working_dir: work\n"
           "    checkpoint: {dir: ckpt/a}\n  - {name: b, command: [b], working_dir: /abs}\n");
  CHECK(config.socket == dir.path() / "run/tpud.sock");
  CHECK(config.state_dir == dir.path() / "state");
  CHECK(config.log_dir == dir.path().parent_path() / "logs");
  CHECK(config.jobs_dir == dir.path() / "jobs.d");
  REQUIRE(config.jobs.size() == 2);
  CHECK(config.jobs[0].working_dir == dir.path() / "work");
  CHECK(config.jobs[0].checkpoint.dir == dir.path() / "ckpt/a");
  CHECK(config.jobs[0].command[0] == "./train.sh");  // argv is never rewritten.
  CHECK(config.jobs[1].working_dir == "/abs");
}

TEST_CASE("Config: log.max_bytes takes integers and size strings", "[config]") {
  const std::pair<const char*, std::uint64_t> sizes[] = {
      {"1234567", 1234567}, {"\"512KB\"", 512000}, {"50MB", 50000000},   {"10MiB", 10u << 20},
      {"1GB", 1000000000},  {"2 GiB", 2ull << 30}, {"64kib", 64u << 10}, {"65536B", 65536},
      {"1TiB", 1ull << 40}};
  for (const auto& [text, bytes] : sizes) {
    INFO(text);
    absl::StatusOr<JobSpec> spec =
        ParseJobSpec(StrCat("name: a\ncommand: [a]\nlog: {max_bytes: ", text, "}\n"), "r", "/");
    REQUIRE(spec.ok());
    CHECK(spec->log.max_bytes == bytes);
  }
  for (const char* bad : {"-5", "1.5GB", "10XB", "50M", "99999999999TiB", "[1]"}) {
    INFO(bad);
    absl::StatusOr<JobSpec> spec =
        ParseJobSpec(StrCat("name: a\ncommand: [a]\nlog: {max_bytes: ", bad, "}\n"), "r", "/");
    REQUIRE_FALSE(spec.ok());
    CHECK_THAT(std::string(spec.status().message()),
               StartsWith("r:3: log.max_bytes: expected a size in bytes"));
  }
}

TEST_CASE("ParseJobSpec: errors name the source, relative paths use base_dir", "[config]") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec("name: a\ncommand: [a]\nworking_dir: w\n", "request", "/base");
  REQUIRE(spec.ok());
  CHECK(spec->working_dir == "/base/w");
  CHECK(spec->origin.empty());
  CHECK(ParseJobSpec("name: a\ncommand: [a]\nstart_seconds: soon\n", "request", "/").status().message() ==
        "request:3: start_seconds: expected a number, got \"soon\"");
  CHECK(ParseJobSpec("", "request", "/").status().message() == "request:1: name: required");
  CHECK_THAT(std::string(ParseJobSpec("name: [\n", "request", "/").status().message()),
             StartsWith("request:2: invalid YAML: "));
}

TEST_CASE("ValidateJobSpec: ad hoc specs obey the same rules without a file prefix", "[config]") {
  JobSpec spec;
  spec.name = "train";
  spec.command = {"python3"};
  CHECK(ValidateJobSpec(spec).ok());
  spec.name = "Bad";
  CHECK(ValidateJobSpec(spec).message() == "name: must match [a-z0-9][a-z0-9_.-]{0,62}, got \"Bad\"");
  spec.name = std::string(64, 'a');
  CHECK_FALSE(ValidateJobSpec(spec).ok());
  spec.name = std::string(63, 'a');
  CHECK(ValidateJobSpec(spec).ok());
  spec.restart.max_restarts = -1;
  CHECK(ValidateJobSpec(spec).message() == "restart.max_restarts: must be >= 0, got -1");
  spec.restart.max_restarts = 0;
  spec.stop.signals = {15, 0};
  CHECK(ValidateJobSpec(spec).message() == "stop.signals[1]: unknown signal 0");
  spec.stop.signals = {15};
  spec.env["A=B"] = "c";
  CHECK(ValidateJobSpec(spec).message() == "env: invalid variable name \"A=B\"");
  CHECK(ValidateJobSpec(spec).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Config: checkpoint layout names round-trip", "[config]") {
  for (CheckpointLayout layout :
       {CheckpointLayout::kAuto, CheckpointLayout::kTensorflow, CheckpointLayout::kOrbax,
        CheckpointLayout::kHuggingface, CheckpointLayout::kTorchDcp, CheckpointLayout::kLightning,
        CheckpointLayout::kPattern}) {
    CHECK(ParseCheckpointLayout(CheckpointLayoutName(layout)) == layout);
  }
  CHECK(std::string(CheckpointLayoutName(CheckpointLayout::kTorchDcp)) == "torch_dcp");
  CHECK_FALSE(ParseCheckpointLayout("Orbax").has_value());
}

TEST_CASE("Config: the repo's example config and job spec parse", "[config]") {
  const fs::path source_dir = TPUD_SOURCE_DIR;
  // The example points jobs_dir at /etc/tpud/jobs.d, which need not exist here.
  std::string text = ReadText(source_dir / "config/tpud.yaml");
  const std::string jobs_dir_line = "\njobs_dir: /etc/tpud/jobs.d\n";
  const size_t at = text.find(jobs_dir_line);
  REQUIRE(at != std::string::npos);
  TempDir dir;
  fs::create_directories(dir.path() / "jobs.d");
  text.replace(at, jobs_dir_line.size(), "\njobs_dir: jobs.d\n");
  const DaemonConfig config = Load(dir, text);
  CHECK(config.socket == "/run/tpud/tpud.sock");
  CHECK(config.state_dir == "/var/lib/tpud");
  CHECK(config.log_dir == "/var/log/tpud");
  CHECK(config.metrics.listen == "127.0.0.1:9464");
  CHECK(config.launcher == "shim");
  CHECK_FALSE(config.stop_jobs_on_exit);
  CHECK(config.gce_metadata.enabled == "auto");
  CHECK(config.jobs.empty());
  CHECK(config.incidents == IncidentConfig{});  // The example shows the defaults.
  CHECK_FALSE(config.slice.has_value());

  // The commented-out slice example loads once uncommented.
  std::string with_slice = text;
  const size_t slice_at = with_slice.find("# slice:\n");
  REQUIRE(slice_at != std::string::npos);
  for (size_t line = slice_at; line < with_slice.size() && with_slice.compare(line, 2, "# ") == 0;
       line = with_slice.find('\n', line) + 1) {
    with_slice.erase(line, 2);
  }
  const DaemonConfig sliced = Load(dir, with_slice);
  REQUIRE(sliced.slice.has_value());
  CHECK(sliced.slice->etcd.endpoints.size() == 3);
  CHECK(sliced.slice->etcd.lease_seconds == 15);
  CHECK_FALSE(sliced.slice->worker_id.has_value());  // auto

  const fs::path example = source_dir / "config/jobs.d/example.yaml.disabled";
  absl::StatusOr<JobSpec> job = ParseJobSpec(ReadText(example), example.string(), example.parent_path());
  INFO(job.status().ToString());
  REQUIRE(job.ok());
  CHECK(job->name == "example");
  CHECK(job->checkpoint.dir == "/mnt/checkpoints/example");
  CHECK(job->stop.signals == StopPolicy{}.signals);  // The example shows the default ladder.
  CHECK(job->log.max_bytes == 50u << 20);

  const fs::path digits = source_dir / "examples/digits/digits.yaml";
  absl::StatusOr<JobSpec> digits_job = ParseJobSpec(ReadText(digits), digits.string(), digits.parent_path());
  INFO(digits_job.status().ToString());
  REQUIRE(digits_job.ok());
  CHECK(digits_job->progress.restore_regex == "^restoring checkpoint");
  CHECK(ValidateJobSpec(*digits_job).ok());
}

TEST_CASE("Config: a bad progress.restore_regex is an error naming the key", "[config]") {
  JobSpec spec;
  spec.name = "t";
  spec.command = {"/bin/true"};
  spec.progress.configured = true;
  spec.progress.restore_regex = "(unclosed";
  const absl::Status status = ValidateJobSpec(spec);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("progress.restore_regex: missing )"));
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Config: progress, failure_rules, checkpoint_signal and gce_metadata parse", "[config]") {
  TempDir dir;
  const DaemonConfig config = Load(dir, R"(gce_metadata: { enabled: "true", host: "127.0.0.1:8080" }
jobs:
  - name: t
    command: [/bin/true]
    checkpoint_signal: SIGUSR1
    progress:
      regex: 'step=(\d+)'
      heartbeat_file: hb
      startup_grace_seconds: 300
      timeout_seconds: 60
      learn_timeout: { safety_factor: 4, min_steps: 10 }
    failure_rules:
      - { match: 'NCCL_TIMEOUT', class: connection, action: restart, hint: 'check links' }
)");
  CHECK(config.gce_metadata.enabled == "true");
  CHECK(config.gce_metadata.host == "127.0.0.1:8080");
  REQUIRE(config.jobs.size() == 1);
  const JobSpec& job = config.jobs[0];
  CHECK(job.checkpoint_signal == SIGUSR1);
  CHECK(job.progress.configured);
  CHECK(job.progress.regex == "step=(\\d+)");
  CHECK(job.progress.heartbeat_file == dir.path() / "hb");
  CHECK(job.progress.startup_grace_seconds == 300);
  CHECK(job.progress.timeout_seconds == 60);
  CHECK(job.progress.learn_timeout);
  CHECK(job.progress.safety_factor == 4);
  CHECK(job.progress.min_steps == 10);
  REQUIRE(job.failure_rules.size() == 1);
  CHECK(job.failure_rules[0].match == "NCCL_TIMEOUT");
  CHECK(job.failure_rules[0].failure_class == FailureClass::kConnection);
  CHECK(job.failure_rules[0].action == RecoveryAction::kRestart);
  CHECK(job.failure_rules[0].hint == "check links");
  CHECK_FALSE(Load(dir, "jobs: [{name: u, command: [/bin/true]}]\n").jobs[0].progress.configured);
}

TEST_CASE("Config: bad failure rules and progress settings name file, line and key", "[config]") {
  TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  CHECK(LoadError(dir, "jobs:\n  - name: t\n    command: [/bin/true]\n    failure_rules:\n"
                       "      - { match: 'x', class: meltdown }\n") ==
        file + ":5: jobs[0].failure_rules[0].class: unknown class \"meltdown\" (known: deadline_exceeded, "
               "connection, preemption, device_busy, crash, hang, hbm_oom, user_error, hardware, "
               "cpu_fallback, unknown)");
  CHECK(LoadError(dir, "jobs:\n  - name: t\n    command: [/bin/true]\n    failure_rules:\n"
                       "      - { match: 'x', action: pray }\n")
            .find(":5: jobs[0].failure_rules[0].action: unknown action \"pray\"") != std::string::npos);
  CHECK(LoadError(dir, "jobs:\n  - name: t\n    command: [/bin/true]\n    failure_rules:\n"
                       "      - { match: '(unclosed' }\n")
            .find("jobs[0].failure_rules[0].match: missing )") != std::string::npos);
  CHECK(LoadError(dir, "jobs:\n  - name: t\n    command: [/bin/true]\n    progress:\n"
                       "      regex: '(bad'\n")
            .find(":5: jobs[0].progress.regex:") != std::string::npos);
  CHECK(LoadError(dir, "jobs:\n  - name: t\n    command: [/bin/true]\n    progress:\n"
                       "      timeout_seconds: -5\n")
            .find(":5: jobs[0].progress.timeout_seconds:") != std::string::npos);
  CHECK(LoadError(dir, "jobs:\n  - name: t\n    command: [/bin/true]\n    checkpoint_signal: SIGNOPE\n") ==
        file + ":4: jobs[0].checkpoint_signal: unknown signal \"SIGNOPE\" (expected e.g. SIGTERM, TERM or 15)");
  CHECK(LoadError(dir, "gce_metadata: { enabled: maybe }\n") ==
        file + ":1: gce_metadata.enabled: expected auto, true or false, got \"maybe\"");
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Config incidents: bounds are checked and named, and capture can be turned off", "[config]") {
  testing::TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  CHECK_THAT(LoadError(dir, "incidents: {capture_seconds: 0}\n"),
             Catch::Contains(file + ":1: incidents.capture_seconds: must be in 1..300, got 0"));
  CHECK_THAT(LoadError(dir, "incidents:\n  keep: 0\n"), Catch::Contains(file + ":2: incidents.keep: must be in 1..10000"));
  CHECK_THAT(LoadError(dir, "incidents: {capture: maybe}\n"), Catch::Contains("incidents.capture"));
  CHECK_THAT(LoadError(dir, "incidents: {stacks: true}\n"), Catch::Contains("stacks"));
  const DaemonConfig off = Load(dir, "incidents: {capture: false, capture_seconds: 30, keep: 5}\n");
  CHECK_FALSE(off.incidents.capture);
  CHECK(off.incidents.capture_seconds == 30);
  CHECK(off.incidents.keep == 5);
  const DaemonConfig capped = Load(dir, "incidents: {max_bytes: 10MiB, removed_keep_days: 2}\n");
  CHECK(capped.incidents.max_bytes == 10u << 20);
  CHECK(capped.incidents.removed_keep_days == 2);
  CHECK_THAT(LoadError(dir, "incidents: {max_bytes: lots}\n"), Catch::Contains("incidents.max_bytes"));
  CHECK_THAT(LoadError(dir, "incidents: {removed_keep_days: -1}\n"),
             Catch::Contains("incidents.removed_keep_days: must be in 0..3650, got -1"));
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Config job: unredacted_env lists the variables a bundle shows as they are", "[config]") {
  absl::StatusOr<JobSpec> spec = ParseJobSpec("name: a\ncommand: [a]\nunredacted_env: [WANDB_RUN_KEY]\n", "r", "/");
  REQUIRE(spec.ok());
  CHECK(spec->unredacted_env == std::vector<std::string>{"WANDB_RUN_KEY"});
  CHECK_FALSE(ParseJobSpec("name: a\ncommand: [a]\nunredacted_env: {A: 1}\n", "r", "/").ok());
}

}  // namespace
}  // namespace tpud
