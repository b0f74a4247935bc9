#include "daemon/tpu/tpu_checks.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpud {
namespace {

TpuCheck Pass(const char* name, std::string detail) { return TpuCheck{name, true, std::move(detail), "", {}}; }

TpuCheck Fail(const char* name, std::string detail, std::string fix, std::optional<FailureClass> reset_for = {}) {
  return TpuCheck{name, false, std::move(detail), std::move(fix), reset_for};
}

TpuCheck CheckDevices(const TpuFacts& f) {
  if (!f.devices.empty()) return Pass("devices", absl::StrJoin(f.devices, ", "));
  const std::string globs = absl::StrJoin(f.device_globs, ", ");
  if (!f.require_devices) return Pass("devices", absl::StrCat("none match ", globs, " (not required)"));
  return Fail("devices", absl::StrCat("no device file matches ", globs),
              "check that this is a TPU VM and tpu.device_globs; if the driver lost the devices, reboot the VM");
}

std::string HolderText(const FileHolder& h) {
  return absl::StrCat("pid ", h.pid, h.comm.empty() ? "" : " (" + h.comm + ")", " holds ", h.path);
}

TpuCheck CheckHolders(const TpuFacts& f) {
  if (!f.holders) {
    return Pass("holders", f.holders_error.empty() ? "not checked (no local backend)"
                                                   : "not checked: " + f.holders_error);
  }
  std::vector<std::string> foreign, supervised;
  for (const FileHolder& h : *f.holders) {
    const auto pgid = f.holder_pgids.find(h.pid);
    const int group = pgid == f.holder_pgids.end() ? 0 : pgid->second;
    if (f.own_pgid != 0 && group == f.own_pgid) continue;
    (f.supervised_pgids.count(group) != 0 ? supervised : foreign).push_back(HolderText(h));
  }
  if (!foreign.empty()) {
    return Fail("holders", absl::StrJoin(foreign, "; "),
                "tpud frees the TPU (local reset); by hand: sudo lsof -w /dev/accel0 (or /dev/vfio/0), stop that "
                "process, then remove a stale /tmp/libtpu_lockfile",
                FailureClass::kDeviceBusy);
  }
  if (!supervised.empty()) {
    return Fail("holders", absl::StrCat("another tpud job's attempt: ", absl::StrJoin(supervised, "; ")),
                "only one process can use the TPU: stop the other job first (tpuctl stop JOB)");
  }
  return Pass("holders", "no other process holds the TPU");
}

TpuCheck CheckUnhealthy(const TpuNode& node) {
  const std::string detail = "node " + node.Summary();  // Summary has the health description.
  if (node.health == "UNHEALTHY_MAINTENANCE") {
    return Fail("node", detail, "wait for the maintenance event to end; tpud waits and retries",
                FailureClass::kConnection);
  }
  return Fail("node", detail, "reset the node: tpuctl reset-tpu (tpud does it before the next attempt)",
              FailureClass::kConnection);
}

TpuCheck CheckNode(const TpuFacts& f) {
  if (!f.node) {
    if (f.node_error.empty()) return Pass("node", "not checked (no node backend)");
    if (!f.unknown_node_fails) return Pass("node", "unknown: " + f.node_error);
    return Fail("node", "cannot describe the node: " + f.node_error,
                "check tpu.name/project/zone (or $TPU_NAME) and that the VM's service account may read Cloud TPU "
                "nodes (roles/tpu.viewer)");
  }
  const TpuNode& node = *f.node;
  if (node.state == kNodeReady || node.state.empty()) {
    if (node.health.empty() || node.health == kNodeHealthy) return Pass("node", "node " + node.Summary());
    return CheckUnhealthy(node);
  }
  if (node.state == "TERMINATED" || node.state == "DELETING" || node.state == "HIDDEN") {
    return Fail("node", "node " + node.Summary(), "the node cannot come back: recreate it");
  }
  return Fail("node", "node " + node.Summary(),
              absl::StrCat("tpud starts it and waits for READY; by hand: gcloud compute tpus tpu-vm start ",
                           f.node_name.empty() ? "$TPU_NAME" : f.node_name, " --zone=ZONE"),
              FailureClass::kPreemption);
}

std::optional<std::string> EnvValue(const TpuFacts& f, const std::string& key) {
  const auto it = f.env.find(key);
  if (it == f.env.end()) return std::nullopt;
  return it->second;
}

TpuCheck CheckEnvironment(const TpuFacts& f) {
  if (const auto name = EnvValue(f, "TPU_NAME")) {
    if (name->empty()) return Fail("environment", "TPU_NAME is set but empty", "unset TPU_NAME or name the TPU");
    if (!f.node_name.empty() && *name != f.node_name && *name != "local") {
      return Fail("environment", absl::StrCat("TPU_NAME=", *name, " but tpu.name is ", f.node_name),
                  absl::StrCat("set TPU_NAME=", f.node_name, " (or local) in the job's env"));
    }
  }
  if (const auto device = EnvValue(f, "PJRT_DEVICE"); device && absl::AsciiStrToUpper(*device) != "TPU") {
    return Fail("environment", absl::StrCat("PJRT_DEVICE=", *device, ": PyTorch/XLA would not use the TPU"),
                "set PJRT_DEVICE=TPU in the job's env");
  }
  if (const auto platforms = EnvValue(f, "JAX_PLATFORMS");
      platforms && !platforms->empty() && !absl::StrContains(absl::AsciiStrToLower(*platforms), "tpu")) {
    return Fail("environment", absl::StrCat("JAX_PLATFORMS=", *platforms, ": JAX would not use the TPU"),
                "set JAX_PLATFORMS=tpu (or unset it) in the job's env");
  }
  const auto name = EnvValue(f, "TPU_NAME");
  return Pass("environment", name ? "TPU_NAME=" + *name : "TPU_NAME unset");
}

}  // namespace

std::vector<TpuCheck> RunTpuChecks(const TpuFacts& facts) {
  return {CheckDevices(facts), CheckHolders(facts), CheckNode(facts), CheckEnvironment(facts)};
}

std::optional<TpuCheck> FirstFailure(const std::vector<TpuCheck>& checks) {
  for (const TpuCheck& check : checks) {
    if (!check.ok) return check;
  }
  return std::nullopt;
}

}  // namespace tpud
