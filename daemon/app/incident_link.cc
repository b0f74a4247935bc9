#include "daemon/app/incident_link.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpud {

IncidentCapturer::IncidentCapturer(boost::asio::io_context& io, incident::CaptureOptions options,
                                   const TpuRecovery* tpu)
    : io_(io), options_(std::move(options)), tpu_(tpu), worker_([this] { Run(); }) {}

IncidentCapturer::~IncidentCapturer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void IncidentCapturer::Capture(incident::CaptureRequest request, std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_ && queue_.size() < kMaxQueued) {
      queue_.push_back(Queued{std::move(request), std::move(done), std::chrono::steady_clock::now()});
      cv_.notify_one();
      return;
    }
  }
  spdlog::warn("job {}: incident bundle {} not captured: {} captures already waiting", request.job,
               request.number, kMaxQueued);
  boost::asio::post(io_, std::move(done));
}

std::string IncidentCapturer::DescribeTpu() const {
  if (tpu_ == nullptr) return "";
  const std::optional<std::pair<TpuNode, SteadyTime>> cached = tpu_->CachedNode();
  if (!cached) return "";
  const TpuNode& node = cached->first;
  std::string text = absl::StrCat("node: ", node.name, "\nstate: ", node.state, "\nhealth: ", node.health, "\n");
  if (!node.health_description.empty()) absl::StrAppend(&text, "health_description: ", node.health_description, "\n");
  if (!node.accelerator_type.empty()) absl::StrAppend(&text, "accelerator_type: ", node.accelerator_type, "\n");
  for (const Symptom& symptom : node.symptoms) {
    absl::StrAppend(&text, "symptom: ", symptom.symptom_type, " ", symptom.create_time, " ", symptom.details, "\n");
  }
  return text;
}

void IncidentCapturer::Run() {
  for (;;) {
    Queued next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // Queued captures are dropped; their Jobs are gone with the loop.
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    incident::CaptureOptions options = options_;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - next.queued);
    if (waited >= options.capture_seconds) {
      next.request.pid = 0;  // Its hang was declared without it: the stop ladder has run.
      options.capture_seconds = std::chrono::seconds(1);
    } else {
      options.capture_seconds -= waited;
    }
    next.request.tpu = DescribeTpu();
    absl::StatusOr<incident::CaptureResult> result = incident::Capture(next.request, options);
    if (!result.ok()) {
      spdlog::error("job {}: incident bundle {}: {}", next.request.job, next.request.number,
                    std::string(result.status().message()));
    } else if (result->notes.empty()) {
      spdlog::info("job {}: incident bundle {} in {:.1f} s", next.request.job, result->dir.string(), result->seconds);
    } else {
      spdlog::warn("job {}: incident bundle {} in {:.1f} s, incomplete: {}", next.request.job, result->dir.string(),
                   result->seconds, absl::StrJoin(result->notes, "; "));
    }
    boost::asio::post(io_, std::move(next.done));
  }
}

std::unique_ptr<IncidentCapturer> IncidentCapturer::Wire(boost::asio::io_context& io, const DaemonConfig& config,
                                                         const TpuRecovery* tpu, Supervisor::Deps* deps) {
  if (!config.incidents.capture) return nullptr;
  incident::CaptureOptions options;
  options.dir = config.state_dir / "incidents";
  options.capture_seconds = std::chrono::seconds(config.incidents.capture_seconds);
  options.keep = config.incidents.keep;
  auto capturer = std::make_unique<IncidentCapturer>(io, std::move(options), tpu);
  deps->capture_incident = [raw = capturer.get()](incident::CaptureRequest request, std::function<void()> done) {
    raw->Capture(std::move(request), std::move(done));
  };
  deps->capture_seconds = Seconds(config.incidents.capture_seconds);
  return capturer;
}

}  // namespace tpud
