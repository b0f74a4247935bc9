#include "daemon/rpc/request_limits.h"

#include <re2/re2.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/core/limits.h"

namespace tpud {
namespace {

using absl::StrCat;

absl::Status TooLarge(absl::string_view field, std::size_t size, std::size_t limit, absl::string_view unit) {
  return absl::InvalidArgumentError(StrCat(field, ": ", size, " ", unit, ", more than the limit of ", limit));
}

// The first bytes of `text`, C-escaped, for an error message.
std::string Quote(const std::string& text) {
  constexpr std::size_t kShown = 40;
  const std::string shown = absl::CHexEscape(text.substr(0, kShown));
  return StrCat("\"", shown, text.size() > kShown ? "\"..." : "\"");
}

absl::Status CheckSize(const google::protobuf::Message& req) {
  const std::size_t size = req.ByteSizeLong();
  if (size > kMaxRequestBytes) return TooLarge("request", size, kMaxRequestBytes, "bytes");
  return absl::OkStatus();
}

absl::Status CheckPath(const char* field, const std::string& path) {
  if (path.size() > kMaxPathBytes) return TooLarge(field, path.size(), kMaxPathBytes, "bytes");
  return absl::OkStatus();
}

// Counts and sizes of an ad hoc command, before it is copied into a JobSpec.
absl::Status CheckAdHoc(const v1::AdHocCommand& ad_hoc) {
  if (ad_hoc.command_size() > static_cast<int>(kMaxArgCount)) {
    return TooLarge("ad_hoc.command", ad_hoc.command_size(), kMaxArgCount, "arguments");
  }
  if (ad_hoc.env_size() > static_cast<int>(kMaxEnvCount)) {
    return TooLarge("ad_hoc.env", ad_hoc.env_size(), kMaxEnvCount, "variables");
  }
  std::size_t total = 0;
  for (int i = 0; i < ad_hoc.command_size(); ++i) {
    const std::size_t size = ad_hoc.command(i).size();
    if (size > kMaxArgBytes) return TooLarge(StrCat("ad_hoc.command[", i, "]"), size, kMaxArgBytes, "bytes");
    total += size + 1;
  }
  for (const auto& [key, value] : ad_hoc.env()) {
    const std::size_t size = key.size() + value.size() + 1;
    if (size > kMaxArgBytes)
      return TooLarge(StrCat("ad_hoc.env[", Quote(key), "]"), size, kMaxArgBytes, "bytes");
    total += size + 1;
  }
  if (total > kMaxExecBytes)
    return TooLarge("ad_hoc.command and ad_hoc.env", total, kMaxExecBytes, "bytes in total");
  return CheckPath("ad_hoc.working_dir", ad_hoc.working_dir());
}

}  // namespace

absl::Status CheckRequest(const v1::StartJobRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  switch (req.spec_case()) {
    case v1::StartJobRequest::SPEC_NOT_SET:
      return CheckJobName("name", req.name(), /*required=*/true);
    case v1::StartJobRequest::kAdHoc:
      if (absl::Status s = CheckJobName("name", req.name(), true); !s.ok()) return s;
      return CheckAdHoc(req.ad_hoc());
    case v1::StartJobRequest::kSpecYaml:
      if (absl::Status s = CheckJobName("name", req.name(), false); !s.ok()) return s;
      if (req.spec_yaml().size() > kMaxSpecYamlBytes) {
        return TooLarge("spec_yaml", req.spec_yaml().size(), kMaxSpecYamlBytes, "bytes");
      }
      return CheckPath("spec_source", req.spec_source());
  }
  return absl::InvalidArgumentError("spec: unknown kind");
}

absl::Status CheckRequest(const v1::StopJobRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("name", req.name(), true);
}

absl::Status CheckRequest(const v1::RemoveJobRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("name", req.name(), true);
}

absl::Status CheckRequest(const v1::RestartJobRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("name", req.name(), true);
}

absl::Status CheckRequest(const v1::GetJobRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("name", req.name(), true);
}

absl::Status CheckRequest(const v1::ListJobsRequest& req) { return CheckSize(req); }

absl::Status CheckRequest(const v1::WatchEventsRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("job", req.job(), false);
}

absl::Status CheckRequest(const v1::TailLogsRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("job", req.job(), true);
}

absl::Status CheckRequest(const v1::GetDaemonInfoRequest& req) { return CheckSize(req); }

absl::Status CheckRequest(const v1::GetTpuRequest& req) { return CheckSize(req); }

absl::Status CheckRequest(const v1::ResetTpuRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  if (req.backend().size() > 32) return absl::InvalidArgumentError("backend: longer than 32 bytes");
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::DoctorRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  return CheckJobName("job", req.job(), false);
}

absl::Status CheckRequest(const v1::GetSliceRequest& req) { return CheckSize(req); }

absl::Status CheckRequest(const v1::GetIncidentRequest& req) {
  if (absl::Status s = CheckSize(req); !s.ok()) return s;
  if (req.number() < 0) return absl::InvalidArgumentError(absl::StrCat("number: must be >= 0, got ", req.number()));
  return CheckJobName("job", req.job(), true);  // It names a directory: the job-name rule keeps it inside.
}

}  // namespace tpud
