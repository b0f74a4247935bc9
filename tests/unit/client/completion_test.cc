// tpuctl's completion scripts (client/completion.h): generated from the CLI11
// app, so every command `tpuctl --help` lists and every flag of each
// `tpuctl COMMAND --help` must be in both scripts; and the zsh quoting of
// help texts. The scripts running in real shells: tests/integration/completion_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "client/completion.h"
#include "client/tpuctl.h"

namespace tpud::client {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// RunTpuctl(args) with std::cout captured; requires exit code 0.
std::string TpuctlOutput(std::vector<std::string> args) {
  args.insert(args.begin(), "tpuctl");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  std::ostringstream captured;
  std::streambuf* const saved = std::cout.rdbuf(captured.rdbuf());
  const int code = RunTpuctl(static_cast<int>(argv.size()), argv.data());
  std::cout.rdbuf(saved);
  INFO("tpuctl " << args[1] << ": " << captured.str());
  REQUIRE(code == 0);
  return captured.str();
}

// The first word of each line of `help`'s SECTION ("Subcommands:" or
// "Options:"), up to the next blank line.
std::vector<std::string> FirstWords(const std::string& help, const std::string& section) {
  std::vector<std::string> words;
  std::istringstream lines(help);
  bool in_section = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == section) {
      in_section = true;
    } else if (in_section && line.empty()) {
      break;
    } else if (in_section && line.size() > 2 && line[2] != ' ') {
      words.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return words;
}

// "-f,--file" -> {"-f", "--file"}; positionals (no leading '-') give nothing.
std::vector<std::string> FlagNames(const std::string& word) {
  std::vector<std::string> names;
  std::istringstream parts(word);
  for (std::string name; std::getline(parts, name, ',');) {
    if (name.rfind("-", 0) == 0) names.push_back(name);
  }
  return names;
}

bool HasWord(const std::string& script, const std::string& word) {
  return std::regex_search(script, std::regex("(^|[^-a-z])" + std::regex_replace(word, std::regex("-"), "\\-") +
                                              "($|[^-a-z])"));
}

// The line of the bash script's case for `command`: "    logs) flags=...".
std::string BashCase(const std::string& bash, const std::string& command) {
  const std::string start = "\n    " + command + ") flags=";
  const auto at = bash.find(start);
  return at == std::string::npos ? "" : bash.substr(at + 1, bash.find('\n', at + 1) - at - 1);
}

}  // namespace

TEST_CASE("tpuctl completion: both scripts name every command of tpuctl --help and each command's "
          "flags", "[client][completion]") {
  const std::string bash = TpuctlOutput({"completion", "bash"});
  const std::string zsh = TpuctlOutput({"completion", "zsh"});
  const std::vector<std::string> commands = FirstWords(TpuctlOutput({"--help"}), "Subcommands:");
  REQUIRE(commands.size() >= 12);
  CHECK(std::find(commands.begin(), commands.end(), kCompleteJobsCommand) == commands.end());  // Hidden.
  for (const std::string& command : commands) {
    INFO("command " << command);
    const std::string bash_case = BashCase(bash, command);
    CHECK_FALSE(bash_case.empty());
    CHECK(HasWord(zsh, "'" + command));  // A _describe item, 'NAME:help'.
    for (const std::string& word : FirstWords(TpuctlOutput({command, "--help"}), "Options:")) {
      for (const std::string& flag : FlagNames(word)) {
        INFO("flag " << flag);
        CHECK(HasWord(bash_case, flag));
        CHECK(HasWord(zsh, flag));
      }
    }
  }
  for (const char* flag : {"--socket", "--timeout", "--version"}) {
    CHECK(HasWord(bash, flag));
    CHECK(HasWord(zsh, flag));
  }
  std::string listed;  // _tpuctl_commands: the commands in --help's order.
  for (const std::string& command : commands) listed += (listed.empty() ? "" : " ") + command;
  CHECK_THAT(bash, Contains("_tpuctl_commands() { echo \"" + listed + "\"; }"));
  CHECK_THAT(bash, Contains("complete -F _tpuctl tpuctl"));
  CHECK_THAT(zsh, StartsWith("#compdef tpuctl\n"));
}

TEST_CASE("Completion: zsh quotes help texts, bash lists each command's job argument and value flags",
          "[client][completion]") {
  CompletionSpec spec;
  spec.version = "9.9";
  spec.global_flags = {{{"--socket"}, "tpud's [unix] socket: a path", "PATH"}};
  spec.commands = {{"logs", "Print a job's output", {{{"-n", "--lines"}, "Last N lines", "N"}}, true, {}},
                   {"completion", "Print a script", {}, false, {"bash", "zsh"}}};
  const std::string zsh = ZshCompletion(spec);
  CHECK_THAT(zsh, Contains(R"('--socket=[tpud'\''s \[unix\] socket: a path]:PATH:_files')"));
  CHECK_THAT(zsh, Contains(R"('logs:Print a job'\''s output')"));
  CHECK_THAT(zsh, Contains(R"('(-n --lines)'{-n,--lines}'[Last N lines]:N: ')"));
  CHECK_THAT(zsh, Contains("'1:job:_tpuctl_jobs'"));
  CHECK_THAT(zsh, Contains("'1:completion:(bash zsh)'"));
  CHECK_THAT(zsh, Contains("(tpud 9.9)"));

  const std::string bash = BashCompletion(spec);
  CHECK_THAT(bash, Contains(R"(logs) flags="-n --lines" file_flags="" value_flags="-n --lines" jobs=1 ;;)"));
  CHECK_THAT(bash, Contains(R"(completion) flags="" file_flags="" value_flags="" words="bash zsh" ;;)"));
  CHECK_THAT(bash, Contains(R"(global_file_flags="--socket")"));
  CHECK_THAT(bash, Contains(R"(_tpuctl_commands() { echo "logs completion"; })"));
}

}  // namespace tpud::client
