// Control request limits (daemon/rpc/request_limits.h) and the job spec's
// execve limits (daemon/core/limits.h, enforced by ValidateJobSpec).
#include "daemon/rpc/request_limits.h"

#include <catch2/catch.hpp>
#include <string>

#include "daemon/config/config.h"
#include "daemon/core/limits.h"

namespace tpud {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

v1::StartJobRequest AdHoc(const std::string& name, std::vector<std::string> argv) {
  v1::StartJobRequest req;
  req.set_name(name);
  for (std::string& arg : argv) req.mutable_ad_hoc()->add_command(std::move(arg));
  return req;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("Request limits: job names", "[limits]") {
  struct Case {
    std::string name;
    bool required;
    bool ok;
  };
  const Case cases[] = {
      {"digits", true, true},
      {"a.b_c-9", true, true},
      {std::string(63, 'a'), true, true},
      {"", false, true},
      {"", true, false},
      {std::string(64, 'a'), true, false},
      {"Digits", true, false},
      {"-x", true, false},
      {"a b", true, false},
      {"\xff\xfe", true, false},
      {std::string("a\0b", 3), true, false},
  };
  for (const Case& c : cases) {
    INFO("name \"" << c.name << "\" required " << c.required);
    const absl::Status status = CheckJobName("name", c.name, c.required);
    CHECK(status.ok() == c.ok);
    if (!c.ok) CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(Message(CheckJobName("name", "", true)) == "name: required");
  CHECK(Message(CheckJobName("job", std::string(100, 'x'), true)) ==
        "job: 100 bytes, more than the limit of 63");
  CHECK_THAT(Message(CheckJobName("name", "Bad\x01", true)),
             Contains("must match [a-z0-9][a-z0-9_.-]{0,62}, got \"Bad\\x01\""));
}

TEST_CASE("Request limits: StartJob without a spec needs a name", "[limits]") {
  v1::StartJobRequest req;
  CHECK(Message(CheckRequest(req)) == "name: required");
  req.set_name("digits");
  CHECK(CheckRequest(req).ok());
}

TEST_CASE("Request limits: ad hoc argv and env are bounded", "[limits]") {
  CHECK(CheckRequest(AdHoc("x", {"/bin/sleep", "10"})).ok());
  CHECK(Message(CheckRequest(AdHoc("", {"/bin/true"}))) == "name: required");

  const v1::StartJobRequest huge = AdHoc("x", {std::string(10 << 20, 'a')});
  CHECK(Message(CheckRequest(huge)) == "request: 10485773 bytes, more than the limit of 4194304");

  const v1::StartJobRequest long_arg = AdHoc("x", {"/bin/echo", std::string(kMaxArgBytes + 1, 'a')});
  CHECK(Message(CheckRequest(long_arg)) == "ad_hoc.command[1]: 131073 bytes, more than the limit of 131072");

  std::vector<std::string> many(kMaxArgCount + 1, "a");
  CHECK_THAT(Message(CheckRequest(AdHoc("x", many))), StartsWith("ad_hoc.command: 32769 arguments"));

  std::vector<std::string> total(10, std::string(kMaxArgBytes - 10, 'a'));
  CHECK_THAT(
      Message(CheckRequest(AdHoc("x", total))),
      StartsWith("ad_hoc.command and ad_hoc.env: 1310630 bytes in total, more than the limit of 1048576"));

  v1::StartJobRequest env = AdHoc("x", {"/bin/true"});
  for (int i = 0; i <= static_cast<int>(kMaxEnvCount); ++i)
    (*env.mutable_ad_hoc()->mutable_env())["V" + std::to_string(i)] = "1";
  CHECK(Message(CheckRequest(env)) == "ad_hoc.env: 8193 variables, more than the limit of 8192");

  v1::StartJobRequest dir = AdHoc("x", {"/bin/true"});
  dir.mutable_ad_hoc()->set_working_dir(std::string(5000, 'd'));
  CHECK(Message(CheckRequest(dir)) == "ad_hoc.working_dir: 5000 bytes, more than the limit of 4095");
}

TEST_CASE("Request limits: spec_yaml is bounded, its name optional", "[limits]") {
  v1::StartJobRequest req;
  req.set_spec_yaml("name: x\ncommand: [/bin/true]\n");
  CHECK(CheckRequest(req).ok());
  req.set_spec_yaml(std::string(kMaxSpecYamlBytes + 1, '#'));
  CHECK(Message(CheckRequest(req)) == "spec_yaml: 262145 bytes, more than the limit of 262144");
}

TEST_CASE("Request limits: names of the other requests", "[limits]") {
  v1::StopJobRequest stop;
  CHECK(Message(CheckRequest(stop)) == "name: required");
  v1::WatchEventsRequest watch;
  CHECK(CheckRequest(watch).ok());  // All jobs.
  watch.set_job("BAD");
  CHECK(CheckRequest(watch).code() == absl::StatusCode::kInvalidArgument);
  v1::TailLogsRequest tail;
  CHECK(Message(CheckRequest(tail)) == "job: required");
  CHECK(CheckRequest(v1::ListJobsRequest()).ok());
  CHECK(CheckRequest(v1::GetDaemonInfoRequest()).ok());
}

TEST_CASE("Job spec limits: NUL bytes, long strings and total size are invalid", "[limits]") {
  JobSpec spec;
  spec.name = "x";
  spec.command = {"/bin/echo", "ok"};
  REQUIRE(ValidateJobSpec(spec).ok());

  JobSpec nul = spec;
  nul.command[1] = std::string("a\0b", 3);
  CHECK(Message(ValidateJobSpec(nul)) == "command[1]: must not contain a NUL byte");

  JobSpec long_env = spec;
  long_env.env["BIG"] = std::string(kMaxArgBytes, 'v');
  CHECK(Message(ValidateJobSpec(long_env)) == "env.BIG: longer than 131072 bytes (131076)");

  JobSpec total = spec;
  total.resume_args.assign(9, std::string(kMaxArgBytes - 1, 'r'));
  CHECK_THAT(Message(ValidateJobSpec(total)), StartsWith("command: command, resume_args and env exceed"));
}

}  // namespace
}  // namespace tpud

namespace tpud {
namespace {

TEST_CASE("Job spec limits: YAML aliases cannot multiply argv or env", "[limits]") {
  const std::string value = "\"" + std::string(100000, 'a') + "\"";
  std::string argv = "name: x\ncommand: [&a " + value;
  std::string env = "name: x\ncommand: [/bin/true]\nenv:\n  V0: &a " + value + "\n";
  for (int i = 1; i <= 20; ++i) {
    argv += ", *a";
    env += "  V" + std::to_string(i) + ": *a\n";
  }
  argv += "]\n";
  CHECK_THAT(std::string(ParseJobSpec(argv, "argv.yaml", "/").status().message()),
             Catch::Matchers::Contains("argv.yaml:2: command: longer than 1048576 bytes in total"));
  CHECK_THAT(std::string(ParseJobSpec(env, "env.yaml", "/").status().message()),
             Catch::Matchers::Contains("env: longer than 1048576 bytes in total"));
}

}  // namespace
}  // namespace tpud
