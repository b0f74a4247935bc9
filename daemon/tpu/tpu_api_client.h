// A client for the Cloud TPU v2 REST API: nodes.get, nodes.stop, nodes.start,
// operations.get. Source: the Cloud TPU API reference,
// https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes
// (googleapis google/cloud/tpu/v2/cloud_tpu.proto, tpu_v2.yaml):
//   GET  /v2/projects/{p}/locations/{z}/nodes/{n}            -> Node
//   POST /v2/projects/{p}/locations/{z}/nodes/{n}:stop  {}   -> Operation
//   POST /v2/projects/{p}/locations/{z}/nodes/{n}:start {}   -> Operation
//   GET  /v2/projects/{p}/locations/{z}/operations/{op}      -> Operation
//   GET  /v2/projects/{p}/locations/{z}/queuedResources/{qr}  -> QueuedResource
//   POST /v2/projects/{p}/locations/{z}/queuedResources/{qr}:reset {} -> Operation
// (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources:
// reset "Resets a QueuedResource TPU instance": the way to reset a multi-host
// slice, whose nodes take no nodes.stop; QueuedResource.state.state is one of
// CREATING, ACCEPTED, PROVISIONING, FAILED, DELETING, ACTIVE, SUSPENDING,
// SUSPENDED, WAITING_FOR_RESOURCES.)
// Operation: {name, metadata{createTime,endTime,target,verb,statusDetail,...},
// done, error{code,message,details}, response}; once done, exactly one of
// error/response is set. JSON fields are camelCase. Error bodies follow the
// Google API error model {"error":{"code","message","status"}}.
//
// Every request carries `Authorization: Bearer <token>` from AccessTokenSource.
// A 401 drops the cached token and retries once with a fresh one. HTTP 429 and
// 5xx answers are retried with exponential backoff, at most max_attempts tries
// in all and never past the caller's deadline; so are transport failures
// (Unavailable, one request's DeadlineExceeded) of GETs, but not of POSTs (a
// :stop that timed out in transit may have been accepted). Requests honour
// https_proxy/no_proxy, as Google's client libraries do.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/gce/http_client.h"
#include "daemon/tpu/access_token.h"
#include "daemon/tpu/cloud_control.h"
#include "daemon/tpu/tpu_control.h"
#include "daemon/tpu/wait_clock.h"

namespace tpud {

// What tpud reads of an Operation.
struct TpuOperation {
  std::string name;  // "projects/p/locations/z/operations/operation-123".
  bool done = false;
  std::string verb;           // metadata.verb, e.g. "stop".
  std::string status_detail;  // metadata.statusDetail.
  // OK unless done with error{code,message}: then the google.rpc code (the
  // same numbers as absl::StatusCode; Unknown when out of range) and message.
  absl::Status error;
};

struct TpuApiOptions {
  std::string endpoint = "https://tpu.googleapis.com";  // No trailing '/'.
  std::chrono::milliseconds request_timeout{30'000};    // One HTTP request.
  int max_attempts = 5;                                 // Tries per call (>= 1).
  Seconds retry_initial{1.0};                           // Backoff doubles from here...
  Seconds retry_max{30.0};                              // ...up to here.
};

// The client options of tpu.api_endpoint, request_timeout_seconds,
// max_attempts, retry_initial_seconds and retry_max_seconds.
TpuApiOptions TpuApiOptionsFor(const TpuConfig& config);

// Thread-safety: safe from any thread (the token source is locked).
class TpuApiClient {
 public:
  TpuApiClient(TpuApiOptions options, std::shared_ptr<HttpClient> http,
               std::shared_ptr<AccessTokenSource> tokens, std::shared_ptr<WaitClock> clock);

  // Errors, each naming the node or operation:
  //   PermissionDenied (403) "permission denied on node projects/p/locations/z/nodes/n: <API message>";
  //   NotFound (404)         "node projects/p/locations/z/nodes/n not found: <API message>";
  //   Unauthenticated        401 even with a fresh token;
  //   Unavailable            429/5xx/transport failures after max_attempts;
  //   DeadlineExceeded       the deadline passed, or the last try timed out; Cancelled;
  //   other 4xx              the code named by the error's "status" field.
  absl::StatusOr<TpuNode> GetNode(const TpuTarget& target, const Deadline& deadline, CancelToken* cancel);
  // Requests stop or start; the Operation as the API returned it (usually not done).
  absl::StatusOr<TpuOperation> PostVerb(const TpuTarget& target, NodeVerb verb, const Deadline& deadline,
                                        CancelToken* cancel);
  // `queued_resource` is "projects/p/locations/z/queuedResources/qr". Errors
  // as above, naming "queued resource projects/...".
  absl::StatusOr<TpuOperation> ResetQueuedResource(const std::string& queued_resource, const Deadline& deadline,
                                                   CancelToken* cancel);
  // The queued resource's state.state, e.g. "ACTIVE".
  absl::StatusOr<std::string> GetQueuedResourceState(const std::string& queued_resource, const Deadline& deadline,
                                                     CancelToken* cancel);
  // `name` as returned by PostVerb ("projects/.../operations/op").
  absl::StatusOr<TpuOperation> GetOperation(const std::string& name, const Deadline& deadline,
                                            CancelToken* cancel);

 private:
  struct Call {
    std::string method;   // "GET" or "POST".
    std::string path;     // After "/v2/".
    std::string subject;  // "node projects/...", for messages.
  };
  absl::StatusOr<std::string> Perform(const Call& call, const Deadline& deadline, CancelToken* cancel);
  absl::StatusOr<std::string> Attempt(const Call& call, const Deadline& deadline, CancelToken* cancel,
                                      bool& retryable);
  // Fetches the token and sends the request; `sent` says whether the request
  // left (false when the deadline or the token failed first).
  absl::StatusOr<HttpResponse> Send(const Call& call, const Deadline& deadline, CancelToken* cancel,
                                    bool& sent);

  const TpuApiOptions options_;
  const std::shared_ptr<HttpClient> http_;
  const std::shared_ptr<AccessTokenSource> tokens_;
  const std::shared_ptr<WaitClock> clock_;
};

// Polls `op` (as `api` returned it for `verb`: "stop", "reset", ...) every
// `poll` until done, reporting through `call`: OK, the operation's error
// (naming it), DeadlineExceeded past `deadline`, or Cancelled.
absl::Status AwaitTpuOperation(TpuApiClient& api, TpuOperation op, const std::string& verb,
                               std::chrono::nanoseconds poll, const Deadline& deadline, const TpuCall& call);

// "operation-123" of "projects/p/locations/z/operations/operation-123".
std::string OperationShortName(const std::string& name);

// Parses an Operation's JSON. InvalidArgument when it is not an object.
absl::StatusOr<TpuOperation> ParseOperationJson(const std::string& json);

}  // namespace tpud
