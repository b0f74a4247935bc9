// Shell completion for tpuctl (`tpuctl completion bash|zsh`): scripts that
// complete commands, flags, and job names, which they ask the daemon for
// through the hidden `tpuctl __complete-jobs`.
//
// The scripts are generated from a CompletionSpec that tpuctl.cc derives from
// its CLI11 app (the only client file that includes CLI11), so they offer
// exactly the commands and flags tpuctl accepts. Bash: complete -F
// (bash(1), "Programmable Completion"); zsh: the completion system's
// _arguments and _describe (zshcompsys(1)).
#pragma once

#include <string>
#include <vector>

#include "client/commands.h"

namespace tpud::client {

// The hidden command the scripts call for job names.
inline constexpr char kCompleteJobsCommand[] = "__complete-jobs";
// What `tpuctl completion` takes.
inline const std::vector<std::string> kCompletionShells = {"bash", "zsh"};

// A flag of tpuctl's command line.
struct CompletionFlag {
  std::vector<std::string> names;  // "-f", "--file".
  std::string help;
  std::string value;               // Empty: takes no value. Else its type name: "FILE" and
                                   // "PATH" complete file names, others nothing.
};

// A command and what may follow it.
struct CompletionCommand {
  std::string name;
  std::string help;
  std::vector<CompletionFlag> flags;
  bool takes_job = false;            // A NAME argument: complete job names.
  std::vector<std::string> choices;  // Else, the words its argument may be (if any).
};

struct CompletionSpec {
  std::vector<CompletionFlag> global_flags;  // Accepted before and after the command.
  std::vector<CompletionCommand> commands;
  std::string version;                       // Named in the scripts' first line.
};

// The bash script: defines _tpuctl and `complete -F _tpuctl tpuctl`. To be
// sourced, or installed as bash-completion's completions/tpuctl.
std::string BashCompletion(const CompletionSpec& spec);

// The zsh script: a `#compdef tpuctl` function file (for fpath, as _tpuctl)
// that also registers itself with compdef when sourced.
std::string ZshCompletion(const CompletionSpec& spec);

// Prints the daemon's job names, one per line (ListJobs). Never fails: when
// the daemon cannot be asked, it prints nothing, since a completion must not
// print errors into the user's command line.
Result PrintJobNames(const Session& session);

}  // namespace tpud::client
