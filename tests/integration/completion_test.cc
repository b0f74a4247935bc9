// `tpuctl completion bash|zsh` in real shells against a real tpud: the
// scripts are sourced, _tpuctl is called with COMP_WORDS/COMP_CWORD set the
// way bash sets them, and job names come back from the daemon, found through
// --socket on the line or $TPUD_SOCKET; an unreachable daemon gives none and
// no error text.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace tpud::testing {
namespace {

constexpr char kJobs[] = R"(
- name: alpha
  command: [/bin/sleep, "60"]
- name: beta.2
  command: [/bin/sleep, "60"]
)";

// A bash word: `text` single-quoted.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// What _tpuctl offers for `words` (the last one is completed), one per line,
// run in `cwd` with the script sourced from `tpuctl completion bash`.
CommandResult BashComplete(const std::vector<std::string>& words, const std::string& cwd,
                           const std::string& env = "") {
  std::string array;
  for (const std::string& word : words) array += " " + Quoted(word);
  const std::string script = "cd " + Quoted(cwd) + " && " + env + " source <(" + Quoted(TPUCTL_BIN) +
                             " completion bash) && COMP_WORDS=(" + Quoted(TPUCTL_BIN) + array +
                             ") && COMP_CWORD=" + std::to_string(words.size()) +
                             " && _tpuctl && printf '%s\\n' \"${COMPREPLY[@]}\"";
  return RunCommand({"bash", "-c", script});
}

}  // namespace

TEST_CASE("Completion: bash completes commands, flags, and job names from the running tpud",
          "[integration][completion]") {
  TempDir dir;
  TpudProcess tpud(dir, kJobs);
  dir.WriteFile("job.yaml", "name: x\n");
  const std::string cwd = dir.path().string(), socket = tpud.socket().string();

  const CommandResult jobs = BashComplete({"--socket", socket, "status", ""}, cwd);
  INFO("stderr: " << jobs.err);
  CHECK(jobs.exit_code == 0);
  CHECK(Lines(jobs.out) == std::vector<std::string>{"alpha", "beta.2"});
  CHECK(jobs.err.empty());
  // --socket=PATH, which bash splits at '=', and $TPUD_SOCKET find it too.
  CHECK(Lines(BashComplete({"--socket", "=", socket, "stop", "b"}, cwd).out) == std::vector<std::string>{"beta.2"});
  CHECK(Lines(BashComplete({"logs", "-f", ""}, cwd, "export TPUD_SOCKET=" + Quoted(socket) + ";").out) ==
        std::vector<std::string>{"alpha", "beta.2"});  // logs -f is --follow, not a file.

  CHECK(Lines(BashComplete({"st"}, cwd).out) == std::vector<std::string>{"start", "stop", "status"});
  CHECK(Lines(BashComplete({"status", "--j"}, cwd).out) == std::vector<std::string>{"--json"});
  CHECK(Lines(BashComplete({"start", "-f", "jo"}, cwd).out) == std::vector<std::string>{"job.yaml"});
  CHECK(Lines(BashComplete({"completion", ""}, cwd).out) == std::vector<std::string>{"bash", "zsh"});

  const CommandResult unreachable = BashComplete({"--socket", (dir / "nobody.sock").string(), "stop", ""}, cwd);
  CHECK(unreachable.exit_code == 0);
  CHECK(unreachable.out == "\n");  // printf with no words prints one empty line.
  CHECK(unreachable.err.empty());
}

TEST_CASE("Completion: the zsh script loads under compinit, registers _tpuctl, and lists the daemon's jobs",
          "[integration][completion]") {
  if (RunCommand({"sh", "-c", "command -v zsh"}).exit_code != 0) {
    WARN("zsh is not installed (scripts/install-deps.sh installs it): zsh completion not tested");
    return;
  }
  TempDir dir;
  TpudProcess tpud(dir, kJobs);
  const std::string script = "autoload -Uz compinit && compinit -u -D && source <(" + Quoted(TPUCTL_BIN) +
                             " completion zsh) && print -r -- $_comps[tpuctl] && tpuctl_words=(" +
                             Quoted(TPUCTL_BIN) + " --socket " + Quoted(tpud.socket().string()) +
                             " status '') && _tpuctl_job_names";
  const CommandResult zsh = RunCommand({"zsh", "-f", "-c", script});
  INFO("stderr: " << zsh.err);
  CHECK(zsh.exit_code == 0);
  CHECK(Lines(zsh.out) == std::vector<std::string>{"_tpuctl", "alpha", "beta.2"});
  CHECK(zsh.err.empty());
}

}  // namespace tpud::testing
