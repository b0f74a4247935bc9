#include "daemon/tpu/tpu_preflight.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace tpud {

std::map<std::string, std::string> JobEnvironment(const JobSpec& spec) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  for (const auto& [key, value] : spec.env) env[key] = value;
  return env;
}

TpuPreflight::TpuPreflight(TpuConfig config, TpuPreflightPolicy policy, TpuRecovery* recovery)
    : config_(config), policy_(policy), recovery_(recovery), local_(std::move(config), SystemWaitClock()) {}

TpuFacts TpuPreflight::HostFacts(const JobSpec& spec, const std::vector<int>& supervised_pgids,
                                 int own_pgid) const {
  TpuFacts facts;
  facts.device_globs = config_.device_globs;
  facts.devices = ExpandGlobs(config_.device_globs);
  facts.require_devices = policy_.require_devices;
  absl::StatusOr<std::vector<FileHolder>> holders = local_.FindHolders(TpuCall{});
  if (holders.ok()) {
    for (const FileHolder& h : *holders) facts.holder_pgids[h.pid] = ::getpgid(h.pid);
    facts.holders = *std::move(holders);
  } else {
    facts.holders_error = std::string(holders.status().message());
  }
  facts.supervised_pgids.insert(supervised_pgids.begin(), supervised_pgids.end());
  facts.own_pgid = own_pgid;
  facts.node_name = config_.name;
  facts.env = JobEnvironment(spec);
  return facts;
}

PreflightVerdict TpuPreflight::Check(const JobSpec& spec, const std::vector<int>& supervised_pgids) const {
  TpuFacts facts = HostFacts(spec, supervised_pgids, 0);
  if (recovery_ != nullptr && recovery_->has_node_backend()) {
    const auto cached = recovery_->CachedNode();
    if (cached && recovery_->clock().Now() - cached->second <= kNodeCacheTtl) {
      facts.node = cached->first;
    } else {
      facts.node_error = "no recent description of the node";
    }
    recovery_->RefreshNode();
  }
  const std::optional<TpuCheck> failed = FirstFailure(RunTpuChecks(facts));
  if (!failed) return PreflightVerdict{};
  spdlog::warn("job {}: preflight {}: {}; fix: {}", spec.name, failed->name, failed->detail, failed->fix);
  return PreflightVerdict{absl::FailedPreconditionError(absl::StrCat(failed->name, ": ", failed->detail)),
                          failed->reset_for};
}

std::vector<TpuCheck> TpuPreflight::Doctor(const JobSpec& spec, const std::vector<int>& supervised_pgids,
                                           int own_pgid, CancelToken* cancel) const {
  TpuFacts facts = HostFacts(spec, supervised_pgids, own_pgid);
  if (recovery_ != nullptr && recovery_->has_node_backend()) {
    facts.unknown_node_fails = true;
    absl::StatusOr<TpuNode> node = recovery_->Describe(cancel);
    if (node.ok()) {
      facts.node = *std::move(node);
    } else {
      facts.node_error = std::string(node.status().message());
    }
  }
  return RunTpuChecks(facts);
}

}  // namespace tpud
