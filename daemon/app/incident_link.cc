#include "daemon/app/incident_link.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpud {
namespace {

// Stacks stop this long before the Job's stop signal is due, so no eu-stack
// is attached when the signal arrives.
constexpr auto kSignalMargin = std::chrono::milliseconds(250);

}  // namespace

IncidentCapturer::IncidentCapturer(boost::asio::io_context& io, incident::CaptureOptions options,
                                   const TpuRecovery* tpu)
    : options_(std::move(options)), tpu_(tpu), shared_(std::make_shared<Shared>()) {
  shared_->io = &io;
  worker_ = std::thread([shared = shared_, options = options_] { Run(shared, options); });
}

IncidentCapturer::~IncidentCapturer() {
  bool exited = false;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stopping = true;
    shared_->queue.clear();  // Their Jobs are gone with the loop.
    exited = shared_->mu.AwaitWithTimeout(absl::Condition(&shared_->exited), absl::FromChrono(kShutdownWait));
    if (!exited) shared_->io = nullptr;
  }
  if (exited) {
    worker_.join();
    return;
  }
  spdlog::warn("incident capture still running after {} s (a process it reads is stuck in the kernel); "
               "exiting without it",
               kShutdownWait.count());
  worker_.detach();  // It holds only `shared` and its own copies.
}

void IncidentCapturer::Enqueue(Queued queued) {
  std::function<void()> dropped;
  {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->stopping) return;
    if (shared_->queue.size() < kMaxQueued || !queued.retire.empty()) {
      shared_->queue.push_back(std::move(queued));
      return;
    }
    dropped = std::move(queued.done);
  }
  spdlog::warn("job {}: incident bundle {} not captured: {} captures already waiting", queued.request.job,
               queued.request.number, kMaxQueued);
  absl::MutexLock lock(&shared_->mu);
  if (shared_->io != nullptr) boost::asio::post(*shared_->io, std::move(dropped));
}

void IncidentCapturer::Capture(incident::CaptureRequest request, std::function<void()> done) {
  request.tpu = DescribeTpu();
  const auto deadline = std::chrono::steady_clock::now() + options_.capture_seconds;
  Enqueue(Queued{std::move(request), std::move(done), deadline, {}});
}

void IncidentCapturer::Retire(const std::string& job) { Enqueue(Queued{{}, nullptr, {}, job}); }

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

void IncidentCapturer::RetireNow(const incident::CaptureOptions& options, const std::string& job) {
  const std::filesystem::path from = options.dir / job;
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) return;
  const std::filesystem::path to =
      options.dir / absl::StrCat(job, ".removed-", ToUnixMillis(std::chrono::system_clock::now()));
  std::filesystem::rename(from, to, ec);
  if (ec) {
    spdlog::error("job {}: incident bundles in {} not moved aside ({}): a new job of that name captures no "
                  "bundle over them; move them by hand",
                  job, from.string(), ec.message());
  } else {
    spdlog::info("job {}: removed; its incident bundles are kept in {}", job, to.string());
  }
}

void IncidentCapturer::KeepWithinBounds(const incident::CaptureOptions& options,
                                        const std::filesystem::path& captured) {
  for (const std::string& line : incident::ApplyRetention(options.dir, options.retention, captured)) {
    spdlog::info("{}", line);
  }
}

void IncidentCapturer::Run(const std::shared_ptr<Shared>& shared, const incident::CaptureOptions& base) {
  for (;;) {
    Queued next;
    {
      absl::MutexLock lock(&shared->mu);
      shared->mu.Await(absl::Condition(shared.get(), &Shared::HasWork));
      if (shared->stopping) {
        shared->exited = true;
        return;
      }
      next = std::move(shared->queue.front());
      shared->queue.pop_front();
    }
    if (!next.retire.empty()) {
      RetireNow(base, next.retire);
      KeepWithinBounds(base, {});
      continue;
    }
    incident::CaptureOptions options = base;
    options.deadline = next.deadline - kSignalMargin;
    if (std::chrono::steady_clock::now() >= *options.deadline) {
      next.request.pid = 0;  // Its hang was declared without it: the stop ladder has run.
    }
    std::filesystem::path captured;
    try {
      absl::StatusOr<incident::CaptureResult> result = incident::Capture(next.request, options);
      if (result.ok()) captured = result->dir;
      if (!result.ok()) {
        spdlog::error("job {}: incident bundle {}: {}", next.request.job, next.request.number,
                      std::string(result.status().message()));
      } else if (result->notes.empty()) {
        spdlog::info("job {}: incident bundle {} in {:.1f} s", next.request.job, result->dir.string(),
                     result->seconds);
      } else {
        spdlog::warn("job {}: incident bundle {} in {:.1f} s, incomplete: {}", next.request.job,
                     result->dir.string(), result->seconds, absl::StrJoin(result->notes, "; "));
      }
    } catch (const std::exception& e) {
      spdlog::error("job {}: incident bundle {} failed: {}", next.request.job, next.request.number, e.what());
    }
    bool more = false;
    {
      // The Job first: a hang's stop signal waits for this.
      absl::MutexLock lock(&shared->mu);
      if (shared->io != nullptr) boost::asio::post(*shared->io, std::move(next.done));
      more = !shared->queue.empty();
    }
    if (!more) KeepWithinBounds(base, captured);  // Between captures, never ahead of one.
  }
}

std::unique_ptr<IncidentCapturer> IncidentCapturer::Wire(boost::asio::io_context& io, const DaemonConfig& config,
                                                         const TpuRecovery* tpu, Supervisor::Deps* deps) {
  if (!config.incidents.capture) return nullptr;
  incident::CaptureOptions options;
  options.dir = config.state_dir / "incidents";
  options.capture_seconds = std::chrono::seconds(config.incidents.capture_seconds);
  options.keep = config.incidents.keep;
  options.retention.max_bytes = config.incidents.max_bytes;
  options.retention.removed_keep = std::chrono::hours(24 * config.incidents.removed_keep_days);
  // Bundles hold jobs' environments: root's alone on disk, also those a
  // tpud before 0700/0600 wrote (GetIncident checks who asks).
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  ::chmod(options.dir.c_str(), 0700);
  auto capturer = std::make_unique<IncidentCapturer>(io, std::move(options), tpu);
  deps->capture_incident = [raw = capturer.get()](incident::CaptureRequest request, std::function<void()> done) {
    raw->Capture(std::move(request), std::move(done));
  };
  deps->retire_incidents = [raw = capturer.get()](const std::string& job) { raw->Retire(job); };
  deps->capture_seconds = Seconds(config.incidents.capture_seconds);
  return capturer;
}

}  // namespace tpud
