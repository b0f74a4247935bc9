// The incident-bundle RPC of SupervisorService (GetIncident).
#include <fstream>

#include "absl/strings/str_cat.h"
#include "daemon/incident/bundle.h"
#include "daemon/rpc/convert.h"
#include "daemon/rpc/service.h"

namespace tpud {
namespace {

// Files sent with include_files, in all: a bundle is capped well below this
// (incident/bundle.h), so only a bundle edited by hand is cut.
constexpr std::uint64_t kMaxIncidentSendBytes = 32ull << 20;

}  // namespace

grpc::Status SupervisorService::GetIncident(grpc::ServerContext* ctx, const v1::GetIncidentRequest* req,
                                            v1::GetIncidentResponse* resp) {
  if (incidents_dir_.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "incident bundles are off (incidents.capture)");
  }
  absl::StatusOr<incident::Bundle> bundle = incident::ReadBundle(incidents_dir_, req->job(), req->number());
  if (!bundle.ok()) return ToGrpcStatus(bundle.status());
  // Who may read it is what the bundle recorded when it was captured, not
  // who owns a job of that name now (a name can be reused by another user).
  const std::optional<Caller> caller = CallerOf(ctx);
  if (caller && !caller->root() && bundle->owner_uid != caller->uid) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("incident bundle ", bundle->number, " of job \"", req->job(),
                                     "\" holds its environment: only the user it ran as and root may read it, "
                                     "not uid ", caller->uid));
  }
  resp->set_job(bundle->job);
  resp->set_number(bundle->number);
  resp->set_dir(bundle->dir.string());
  resp->set_summary_json(bundle->summary_json);
  for (std::int64_t n : incident::ListBundles(incidents_dir_, req->job())) resp->add_numbers(n);
  std::uint64_t sent = 0;
  for (const incident::BundleFile& file : bundle->files) {
    v1::IncidentFile* out = resp->add_files();
    out->set_name(file.name);
    out->set_size(file.size);
    if (!req->include_files()) continue;
    if (sent + file.size > kMaxIncidentSendBytes) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("incident bundle ", bundle->dir.string(), " holds more than ",
                                       kMaxIncidentSendBytes, " bytes; copy the directory instead"));
    }
    absl::StatusOr<std::string> content = incident::ReadBundleFile(*bundle, file.name, file.size);
    if (!content.ok()) continue;  // Replaced by a link or gone meanwhile: listed, never followed.
    sent += content->size();
    out->set_content(*std::move(content));
  }
  return grpc::Status::OK;
}

}  // namespace tpud
