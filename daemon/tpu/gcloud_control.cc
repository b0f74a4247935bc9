#include "daemon/tpu/gcloud_control.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tpud {
namespace {

// The last non-blank line of gcloud's stderr (its error message).
std::string LastLine(const std::string& text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (!trimmed.empty()) last = std::string(trimmed);
  }
  return last.empty() ? "(no output on stderr)" : last;
}

absl::Status FailedRun(const CommandResult& run, const std::string& command, const TpuTarget& target) {
  const std::string line = LastLine(run.stderr_text);
  const std::string node = "node " + target.ResourceName();
  if (absl::StrContains(line, "NOT_FOUND"))
    return absl::NotFoundError(absl::StrCat(node, " not found: ", line));
  if (absl::StrContains(line, "PERMISSION_DENIED")) {
    return absl::PermissionDeniedError(absl::StrCat("permission denied on ", node, ": ", line));
  }
  return absl::UnknownError(absl::StrCat(command, ": ", run.status.Describe(), ": ", line));
}

}  // namespace

GcloudTpuControl::GcloudTpuControl(TpuConfig config, std::shared_ptr<const MetadataClient> metadata,
                                   std::shared_ptr<WaitClock> clock)
    : CloudTpuControl(std::move(config), std::move(metadata), std::move(clock)) {}

std::vector<std::string> GcloudTpuControl::Argv(const std::string& verb, const TpuTarget& target) const {
  return {config().gcloud_path, "compute",   "tpus",         "tpu-vm",       verb, target.node, "--zone",
          target.zone,          "--project", target.project, "--format=json"};
}

absl::StatusOr<std::string> GcloudTpuControl::Run(const std::string& verb, const TpuTarget& target,
                                                  const Deadline& deadline, CancelToken* cancel) {
  const std::vector<std::string> argv = Argv(verb, target);
  const std::string command = absl::StrJoin(argv.begin(), argv.begin() + 6, " ");
  const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::min(deadline.Remaining(), Deadline::ToDuration(Seconds(config().gcloud_timeout_seconds))));
  if (deadline.Expired()) return absl::DeadlineExceededError(command + ": out of time");
  CommandOptions options;
  options.timeout = limit;
  options.cancel = cancel;
  absl::StatusOr<CommandResult> run = RunCommand(argv, options);
  if (!run.ok()) {
    return absl::Status(run.status().code(),
                        absl::StrCat(command, ": ", std::string(run.status().message())));
  }
  if (!run->status.succeeded()) return FailedRun(*run, command, target);
  return std::move(run->stdout_text);
}

absl::StatusOr<TpuNode> GcloudTpuControl::GetNode(const TpuTarget& target, const Deadline& deadline,
                                                  CancelToken* cancel) {
  absl::StatusOr<std::string> json = Run("describe", target, deadline, cancel);
  if (!json.ok()) return json.status();
  absl::StatusOr<TpuNode> node = ParseNodeJson(*json);
  if (!node.ok()) {
    return absl::UnknownError(
        absl::StrCat("gcloud describe ", target.node, ": ", std::string(node.status().message())));
  }
  return node;
}

absl::Status GcloudTpuControl::RunVerb(const TpuTarget& target, NodeVerb verb, const Deadline& deadline,
                                       const TpuCall& call) {
  call.Report(absl::StrCat("gcloud ", NodeVerbName(verb), " requested"));
  absl::StatusOr<std::string> out = Run(NodeVerbName(verb), target, deadline, call.cancel);
  if (!out.ok()) return out.status();
  call.Report(absl::StrCat("gcloud ", NodeVerbName(verb), " done"));
  return absl::OkStatus();
}

}  // namespace tpud
