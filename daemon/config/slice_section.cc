#include "daemon/config/slice_section.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/etcd/endpoints.h"

namespace tpud::config_internal {
namespace {

constexpr absl::string_view kSliceKeys[] = {"etcd", "name", "worker_id", "num_workers"};
constexpr absl::string_view kEtcdKeys[] = {"endpoints", "prefix", "lease_seconds", "tls"};
constexpr absl::string_view kTlsKeys[] = {"ca", "cert", "key"};

// `key` as `auto` (nullopt) or an integer.
void ReadAutoInt(Reader& r, const YAML::Node& slice, absl::string_view key, std::optional<int>* out) {
  const Entry entry = Find(slice, key);
  if (!r.ok() || !entry.found) return;
  int value = 0;
  if (entry.value.IsScalar() && entry.value.Scalar() == "auto") {
    out->reset();
  } else if (entry.value.IsScalar() && absl::SimpleAtoi(entry.value.Scalar(), &value)) {
    *out = value;
  } else {
    r.Fail(entry.mark, absl::StrCat("slice.", key), "expected auto or an integer");
  }
}

std::filesystem::path ResolveAgainst(const std::filesystem::path& base, const std::filesystem::path& path) {
  if (path.empty() || path.is_absolute()) return path;
  return (base / path).lexically_normal();
}

}  // namespace

void ReadSliceSection(Reader& r, const YAML::Node& root, const std::filesystem::path& base, DaemonConfig* config) {
  const std::optional<YAML::Node> slice = Section(r, root, "", "slice", kSliceKeys);
  if (!slice) return;
  SliceConfig c;
  if (const std::optional<YAML::Node> etcd = Section(r, *slice, "slice", "etcd", kEtcdKeys)) {
    ReadStrings(r, *etcd, "slice.etcd", "endpoints", &c.etcd.endpoints);
    Read(r, *etcd, "slice.etcd", "prefix", &c.etcd.prefix);
    Read(r, *etcd, "slice.etcd", "lease_seconds", &c.etcd.lease_seconds);
    if (const std::optional<YAML::Node> tls = Section(r, *etcd, "slice.etcd", "tls", kTlsKeys)) {
      Read(r, *tls, "slice.etcd.tls", "ca", &c.etcd.tls.ca);
      Read(r, *tls, "slice.etcd.tls", "cert", &c.etcd.tls.cert);
      Read(r, *tls, "slice.etcd.tls", "key", &c.etcd.tls.key);
      c.etcd.tls.ca = ResolveAgainst(base, c.etcd.tls.ca);
      c.etcd.tls.cert = ResolveAgainst(base, c.etcd.tls.cert);
      c.etcd.tls.key = ResolveAgainst(base, c.etcd.tls.key);
    }
  }
  Read(r, *slice, "slice", "name", &c.name);
  ReadAutoInt(r, *slice, "worker_id", &c.worker_id);
  ReadAutoInt(r, *slice, "num_workers", &c.num_workers);
  if (!r.ok()) return;
  if (const absl::Status status = ValidateSliceConfig(c); !status.ok()) {
    const std::string message(status.message());
    const std::string key = message.substr(0, message.find(": "));
    const std::string reason = message.substr(std::min(message.size(), key.size() + 2));
    r.Fail(MarkOf(root, root.Mark(), key), key, reason);
    return;
  }
  // As the etcd client will parse them (etcd/endpoints.h), so a bad one fails
  // `tpud --check` and a reload, not tpud's start.
  const bool tls = !c.etcd.tls.ca.empty() || !c.etcd.tls.cert.empty();
  for (const std::string& endpoint : c.etcd.endpoints) {
    if (absl::StatusOr<etcd::Endpoint> parsed = etcd::ParseEndpoint(endpoint, tls); !parsed.ok()) {
      r.Fail(MarkOf(root, root.Mark(), "slice.etcd.endpoints"), "slice.etcd.endpoints", parsed.status().message());
      return;
    }
  }
  config->slice = std::move(c);
}

}  // namespace tpud::config_internal
