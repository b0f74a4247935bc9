// Classifying saved logs offline (`tpud classify`): line numbers, the
// human and JSON output, a job's failure_rules, and errors naming the file.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "daemon/app/classify_command.h"
#include "daemon/classify/classify_logs.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/classify/classifier_test_util.h"

namespace tpud {
namespace {

using testing::ExitCode;
using testing::MakeClassifier;
using testing::TempDir;

// google-deepmind/gemma#85.
constexpr char kOomLine[] =
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
    "Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)";

TEST_CASE("Classify logs: a file's verdict names the deciding line and its number",
          "[classify][classify_logs]") {
  TempDir dir;
  const std::string log =
      dir.File("train.log", std::string("step=1 loss=2\r\nTraceback (most recent call last):\n") + kOomLine +
                                "\r\nF0000 00:00:1.5 1 x.cc:1] Check failed: ok\n");
  auto verdict = ClassifyLogFile(log, MakeClassifier(), ExitCode(1));
  REQUIRE(verdict.ok());
  CHECK(verdict->lines == 4);
  CHECK(verdict->verdict.rule == "builtin:hbm_oom_runtime");
  CHECK(verdict->verdict.matched_line_number == 3);
  CHECK(verdict->verdict.matched_line == kOomLine);  // Without the '\r'.

  const std::string text = FormatLogVerdict(*verdict);
  CHECK(text == log + "\n  class:  hbm_oom\n  action: fail\n  rule:   builtin:hbm_oom_runtime\n"
                      "  line 3: " + kOomLine + "\n  hint:   " + verdict->verdict.hint + "\n");
  const nlohmann::json json = nlohmann::json::parse(LogVerdictJson(*verdict));
  CHECK(json["class"] == "hbm_oom");
  CHECK(json["action"] == "fail");
  CHECK(json["line_number"] == 3);
  CHECK(json["line"] == kOomLine);
  CHECK(json["file"] == log);
}

TEST_CASE("Classify logs: with no matching line the exit code decides", "[classify][classify_logs]") {
  TempDir dir;
  const std::string log = dir.File("quiet.log", "step=1\nstep=2\n");
  auto verdict = ClassifyLogFile(log, MakeClassifier(), ExitCode(3));
  REQUIRE(verdict.ok());
  CHECK(verdict->verdict.rule == "exit:code 3");
  CHECK(verdict->verdict.matched_line_number == 0);
  CHECK(FormatLogVerdict(*verdict).find("  line:   none (2 lines read, none matched a rule)\n") !=
        std::string::npos);
}

TEST_CASE("Classify logs: an unreadable file is an error naming it", "[classify][classify_logs]") {
  TempDir dir;
  auto missing = ClassifyLogFile(dir.path() / "nope.log", MakeClassifier(), ExitCode(1));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()) ==
        (dir.path() / "nope.log").string() + ": cannot open: No such file or directory");
  auto directory = ClassifyLogFile(dir.path(), MakeClassifier(), ExitCode(1));
  REQUIRE_FALSE(directory.ok());
  CHECK(std::string(directory.status().message()) == dir.path().string() + ": is a directory");
}

TEST_CASE("Classify logs: a FIFO or a device is refused, not read forever", "[classify][classify_logs]") {
  TempDir dir;
  const std::filesystem::path fifo = dir.path() / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto from_fifo = ClassifyLogFile(fifo, MakeClassifier(), ExitCode(1));  // Would block with no writer.
  REQUIRE_FALSE(from_fifo.ok());
  CHECK(std::string(from_fifo.status().message()) ==
        fifo.string() + ": is a FIFO; classify reads regular files, or - for standard input");
  auto zero = ClassifyLogFile("/dev/zero", MakeClassifier(), ExitCode(1));  // Would never end.
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(zero.status().message()), Catch::Matchers::Contains("is a character device"));
}

TEST_CASE("Classify logs: a line past 64 KiB is cut, and the lines after it still count",
          "[classify][classify_logs]") {
  TempDir dir;
  const std::string log = dir.File("long.log", std::string(3 << 20, 'x') + "\n" + kOomLine + "\n");
  auto verdict = ClassifyLogFile(log, MakeClassifier(), ExitCode(1));
  REQUIRE(verdict.ok());
  CHECK(verdict->lines == 2);
  CHECK(verdict->verdict.matched_line_number == 2);
  CHECK(verdict->verdict.matched_line == kOomLine);
  const std::string no_newline = dir.File("one.log", std::string(1 << 20, 'y') + kOomLine);
  auto cut = ClassifyLogFile(no_newline, MakeClassifier(), ExitCode(1));
  REQUIRE(cut.ok());
  CHECK(cut->lines == 1);
  CHECK(cut->verdict.matched_line_number == 0);  // The OOM text lies past the cut.
}

TEST_CASE("Classify command: a job's failure_rules apply first, and bad files exit 2 naming them",
          "[classify][classify_logs]") {
  TempDir dir;
  const std::string log =
      dir.File("a.log", std::string("watchdog: NCCL_TIMEOUT after 1800s\n") + kOomLine + "\n");
  const std::string job = dir.File("job.yaml",
                                   "name: trainer\ncommand: [python3, train.py]\nfailure_rules:\n"
                                   "  - {match: 'NCCL_TIMEOUT', class: connection, action: restart}\n");
  std::ostringstream out, err;
  ClassifyOptions options{{log}, job, /*json=*/true, 1};
  CHECK(RunClassifyCommand(options, out, err) == 0);
  const nlohmann::json json = nlohmann::json::parse(out.str());
  CHECK(json["rule"] == "user:0");
  CHECK(json["line_number"] == 1);
  CHECK(err.str().empty());

  std::ostringstream out2, err2;
  options = ClassifyOptions{};
  options.log_files = {(dir.path() / "missing.log").string(), log};
  CHECK(RunClassifyCommand(options, out2, err2) == 2);
  CHECK(err2.str() == "tpud classify: " + (dir.path() / "missing.log").string() +
                        ": cannot open: No such file or directory\n");
  CHECK(out2.str().find("rule:   builtin:hbm_oom_runtime") != std::string::npos);  // The good file still.

  const std::string bad_job =
      dir.File("bad.yaml", "name: trainer\ncommand: [x]\nfailure_rules:\n  - {match: '(oops'}\n");
  std::ostringstream out3, err3;
  options = ClassifyOptions{{log}, bad_job, false, 1};
  CHECK(RunClassifyCommand(options, out3, err3) == 2);
  CHECK(out3.str().empty());
  CHECK(err3.str().find(bad_job) != std::string::npos);
  CHECK(err3.str().find("failure_rules[0].match") != std::string::npos);
}

}  // namespace
}  // namespace tpud
