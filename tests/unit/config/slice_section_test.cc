// The `slice:` section of tpud.yaml (daemon/config/slice_section.h), `gang:`
// in job specs, and ExpandWorker: defaults, every key, errors naming the
// file, line and key.
#include <catch2/catch.hpp>
#include <string>

#include "daemon/config/config.h"
#include "tests/support/temp_dir.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;

absl::StatusOr<DaemonConfig> LoadYaml(const testing::TempDir& dir, const std::string& yaml) {
  return LoadDaemonConfig(dir.File("tpud.yaml", yaml));
}

std::string ErrorOf(const testing::TempDir& dir, const std::string& yaml) {
  const absl::StatusOr<DaemonConfig> config = LoadYaml(dir, yaml);
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

}  // namespace

TEST_CASE("Config slice: absent means one VM alone, and every key is read", "[config][slice]") {
  testing::TempDir dir;
  const absl::StatusOr<DaemonConfig> alone = LoadYaml(dir, "socket: /tmp/x.sock\n");
  REQUIRE(alone.ok());
  CHECK_FALSE(alone->slice);

  const absl::StatusOr<DaemonConfig> config = LoadYaml(dir,
                                                       "slice:\n"
                                                       "  etcd:\n"
                                                       "    endpoints: [\"10.0.0.5:2379\", \"https://10.0.0.6:2379\"]\n"
                                                       "    prefix: /tpud-test\n"
                                                       "    lease_seconds: 5\n"
                                                       "    tls: {ca: ca.pem, cert: /etc/c.pem, key: k.pem}\n"
                                                       "  name: v4-32\n"
                                                       "  worker_id: 2\n"
                                                       "  num_workers: 4\n");
  REQUIRE(config.ok());
  REQUIRE(config->slice);
  const SliceConfig& slice = *config->slice;
  CHECK(slice.etcd.endpoints == std::vector<std::string>{"10.0.0.5:2379", "https://10.0.0.6:2379"});
  CHECK(slice.etcd.prefix == "/tpud-test");
  CHECK(slice.etcd.lease_seconds == 5);
  CHECK(slice.etcd.tls.ca == dir.path() / "ca.pem");  // Relative to the config file.
  CHECK(slice.etcd.tls.cert == "/etc/c.pem");
  CHECK(slice.name == "v4-32");
  CHECK(slice.worker_id == 2);
  CHECK(slice.num_workers == 4);

  const absl::StatusOr<DaemonConfig> automatic =
      LoadYaml(dir, "slice:\n  etcd: {endpoints: [127.0.0.1:2379]}\n  worker_id: auto\n  num_workers: auto\n");
  REQUIRE(automatic.ok());
  CHECK_FALSE(automatic->slice->worker_id);
  CHECK_FALSE(automatic->slice->num_workers);
  CHECK(automatic->slice->etcd.prefix == "/tpud");
  CHECK(automatic->slice->etcd.lease_seconds == 15);
}

TEST_CASE("Config slice: bad values are errors naming the file, line and key", "[config][slice]") {
  testing::TempDir dir;
  const std::string file = (dir.path() / "tpud.yaml").string();
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [a:1], lease_seconds: 1}\n"),
             Contains(file + ":") && Contains("slice.etcd.lease_seconds: must be in 2..300, got 1"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: []}\n"), Contains("slice.etcd.endpoints: needs at least one"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  name: x\n"), Contains("slice.etcd.endpoints"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [a:1], prefix: tpud}\n"), Contains("slice.etcd.prefix"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [a:1]}\n  worker_id: 4\n  num_workers: 4\n"),
             Contains("slice.worker_id: must be below num_workers (4), got 4"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [a:1]}\n  worker_id: first\n"),
             Contains(file + ":3: slice.worker_id: expected auto or an integer"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [a:1], tls: {cert: c.pem}}\n"),
             Contains("slice.etcd.tls.cert: cert and key go together"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [a:1], lease: 3}\n"), Contains("lease"));
  // Each endpoint is checked as the etcd client will parse it, at load (so `tpud --check` and a
  // reload catch it), not when tpud starts the slice.
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd:\n    endpoints: [\"10.0.0.5:2379\", \"10.0.0.6\"]\n"),
             Contains(file + ":3: slice.etcd.endpoints: etcd endpoint \"10.0.0.6\""));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [\"ftp://a:1\"]}\n"),
             Contains("scheme must be http:// or https://"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [\"http://a:1\"], tls: {ca: ca.pem}}\n"),
             Contains("is http:// (plaintext) but tls is configured"));
  CHECK_THAT(ErrorOf(dir, "slice:\n  etcd: {endpoints: [\"a:99999\"]}\n"), Contains("etcd endpoint \"a:99999\""));
}

TEST_CASE("Config slice: a gang job needs the slice section", "[config][slice]") {
  testing::TempDir dir;
  CHECK_THAT(ErrorOf(dir, "jobs:\n  - name: train\n    command: [/bin/true]\n    gang: true\n"),
             Contains("jobs[0].gang: job \"train\" is a gang job, but this tpud has no slice: section"));
  const absl::StatusOr<DaemonConfig> config = LoadYaml(
      dir, "slice:\n  etcd: {endpoints: [a:1]}\njobs:\n  - name: train\n    command: [/bin/true]\n    gang: true\n");
  REQUIRE(config.ok());
  CHECK(config->jobs.at(0).gang);
}

TEST_CASE("ExpandWorker: one gang spec serves every worker", "[config][slice]") {
  JobSpec spec;
  spec.name = "train";
  spec.command = {"python3", "train.py", "--rank={worker_id}", "--world={num_workers}"};
  spec.resume_args = {"--resume={checkpoint}", "--step={step}"};
  spec.env = {{"RANK", "{worker_id}"}, {"PLAIN", "x"}};
  spec.working_dir = "/runs/w{worker_id}";
  spec.checkpoint.dir = "/ckpt/{worker_id}-of-{num_workers}";
  spec.progress.heartbeat_file = "/tmp/hb-{worker_id}";
  const JobSpec w3 = ExpandWorker(spec, 3, 4);
  CHECK(w3.command == std::vector<std::string>{"python3", "train.py", "--rank=3", "--world=4"});
  CHECK(w3.resume_args == spec.resume_args);  // {checkpoint} and {step} are the attempt's, left alone.
  CHECK(w3.env.at("RANK") == "3");
  CHECK(w3.env.at("PLAIN") == "x");
  CHECK(w3.working_dir == "/runs/w3");
  CHECK(w3.checkpoint.dir == "/ckpt/3-of-4");
  CHECK(w3.progress.heartbeat_file == "/tmp/hb-3");
  CHECK(ExpandWorker(w3, 0, 1) == w3);  // Nothing left to expand.
}

}  // namespace tpud
