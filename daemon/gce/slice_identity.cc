#include "daemon/gce/slice_identity.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tpud {
namespace {

// Non-empty entries of a comma-separated list.
int CountEntries(const std::string& list) {
  int count = 0;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    if (!absl::StripAsciiWhitespace(entry).empty()) ++count;
  }
  return count;
}

absl::StatusOr<int> ParseWorkerId(const std::string& text, const std::string& where) {
  int id = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &id) || id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a worker id >= 0, got \"", text, "\""));
  }
  return id;
}

// The TPU node's name from this VM's instance name: a TPU VM worker is named
// "{node-id}-w-{worker}" (e.g. t1v-n-1a2b3c4d-w-0), one node-id per slice.
std::optional<std::string> NodeNameFromMetadata(const MetadataClient* metadata) {
  if (metadata == nullptr) return std::nullopt;
  absl::StatusOr<MetadataValue> value = metadata->Get(kInstanceNameKey);
  if (!value.ok()) return std::nullopt;
  std::string name(absl::StripAsciiWhitespace(value->value));
  const std::size_t w = name.rfind("-w-");
  int worker = 0;
  if (w != std::string::npos && w > 0 && absl::SimpleAtoi(absl::string_view(name).substr(w + 3), &worker)) {
    name.resize(w);
  }
  if (name.empty()) return std::nullopt;
  return name;
}

}  // namespace

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

absl::StatusOr<SliceIdentity> ResolveSliceIdentity(const SliceConfig& slice, const std::string& tpu_name,
                                                   const MetadataClient* metadata, const GetEnv& getenv) {
  SliceIdentity identity;
  std::vector<std::string> sources;

  if (!slice.name.empty()) {
    identity.name = slice.name;
    sources.push_back("name: config");
  } else if (!tpu_name.empty()) {
    identity.name = tpu_name;
    sources.push_back("name: tpu.name");
  } else if (std::optional<std::string> node = NodeNameFromMetadata(metadata)) {
    identity.name = *node;
    sources.push_back("name: metadata");
  } else {
    // Not $TPU_NAME: it is "local" (or unset) on many TPU VMs, and two
    // slices sharing one name on one etcd would become one gang.
    return absl::FailedPreconditionError(absl::StrCat(
        "slice.name is empty, and neither tpu.name nor the metadata server (", kInstanceNameKey,
        ") names the slice; set slice.name to a name unique to this slice on its etcd"));
  }
  if (identity.name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("slice name \"", identity.name, "\" must not contain '/'"));
  }

  if (slice.worker_id) {
    identity.worker_id = *slice.worker_id;
    sources.push_back("worker_id: config");
  } else {
    std::string tried;
    absl::StatusOr<MetadataValue> value =
        metadata != nullptr ? metadata->Get(kAgentWorkerNumberKey) : absl::UnavailableError("not used");
    if (value.ok()) {
      absl::StatusOr<int> id = ParseWorkerId(value->value, kAgentWorkerNumberKey);
      if (!id.ok()) return id.status();
      identity.worker_id = *id;
      sources.push_back("worker_id: metadata");
    } else if (std::optional<std::string> env = getenv("TPU_WORKER_ID")) {
      absl::StatusOr<int> id = ParseWorkerId(*env, "$TPU_WORKER_ID");
      if (!id.ok()) return id.status();
      identity.worker_id = *id;
      sources.push_back("worker_id: $TPU_WORKER_ID");
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "slice.worker_id is auto, and neither the metadata server (", kAgentWorkerNumberKey, ": ",
          value.status().message(), ") nor $TPU_WORKER_ID has it; set slice.worker_id"));
    }
  }

  if (slice.num_workers) {
    identity.num_workers = *slice.num_workers;
    sources.push_back("num_workers: config");
  } else {
    absl::StatusOr<MetadataValue> value =
        metadata != nullptr ? metadata->Get(kWorkerNetworkEndpointsKey) : absl::UnavailableError("not used");
    if (value.ok() && CountEntries(value->value) > 0) {
      identity.num_workers = CountEntries(value->value);
      sources.push_back("num_workers: metadata");
    } else if (std::optional<std::string> env = getenv("TPU_WORKER_HOSTNAMES"); env && CountEntries(*env) > 0) {
      identity.num_workers = CountEntries(*env);
      sources.push_back("num_workers: $TPU_WORKER_HOSTNAMES");
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "slice.num_workers is auto, and neither the metadata server (", kWorkerNetworkEndpointsKey, ": ",
          value.ok() ? "empty" : value.status().message(), ") nor $TPU_WORKER_HOSTNAMES has it; set slice.num_workers"));
    }
  }
  if (identity.worker_id >= identity.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker id ", identity.worker_id, " is not below the slice's ",
                                                   identity.num_workers, " workers (", absl::StrJoin(sources, ", "),
                                                   ")"));
  }
  identity.source = absl::StrJoin(sources, ", ");
  return identity;
}

}  // namespace tpud
