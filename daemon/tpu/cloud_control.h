// The node lifecycle shared by the cloud backends (api, gcloud): each backend
// supplies "get the node" and "run a stop/start to completion"; this class
// sequences them into Describe, Reset and Start, polls the node until it is
// READY (and HEALTHY), reports progress, and enforces the overall timeout.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/tpu/tpu_control.h"

namespace tpud {

enum class NodeVerb { kStop, kStart };
// "stop" / "start": the API's custom-method suffix and gcloud's subcommand.
const char* NodeVerbName(NodeVerb verb);

// Thread-safety: as TpuControl; subclasses' primitives must be callable from
// several threads at once.
class CloudTpuControl : public TpuControl {
 public:
  absl::StatusOr<TpuNode> Describe(CancelToken* cancel) final;
  absl::Status Reset(const TpuCall& call) final;
  absl::Status Start(const TpuCall& call) final;

 protected:
  // `metadata` resolves the project/zone when the config leaves them empty.
  CloudTpuControl(TpuConfig config, std::shared_ptr<const MetadataClient> metadata,
                  std::shared_ptr<WaitClock> clock);

  // The node, in one request (retries included), within `deadline`.
  virtual absl::StatusOr<TpuNode> GetNode(const TpuTarget& target, const Deadline& deadline,
                                          CancelToken* cancel) = 0;
  // Requests `verb` and waits until the request is done (the API's operation
  // or the gcloud run), not for the node's state. Reports its own progress.
  virtual absl::Status RunVerb(const TpuTarget& target, NodeVerb verb, const Deadline& deadline,
                               const TpuCall& call) = 0;

  const TpuConfig& config() const { return config_; }
  WaitClock& clock() const { return *clock_; }
  std::chrono::nanoseconds poll_interval() const {
    return Deadline::ToDuration(Seconds(config_.poll_interval_seconds));
  }

 private:
  absl::StatusOr<TpuTarget> Target(CancelToken* cancel);
  // Polls until READY (and HEALTHY when `healthy`), starting the node once if
  // `start_if_stopped` and it is STOPPED or PREEMPTED.
  absl::Status WaitReady(const TpuTarget& target, const Deadline& deadline, const TpuCall& call, bool healthy,
                         bool start_if_stopped);

  const TpuConfig config_;
  const std::shared_ptr<const MetadataClient> metadata_;
  const std::shared_ptr<WaitClock> clock_;
  absl::Mutex mu_;
  std::optional<TpuTarget> target_ ABSL_GUARDED_BY(mu_);  // Set once resolved.
};

}  // namespace tpud
