#include "client/commands.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "client/format.h"
#include "client/interrupt.h"
#include "client/progress.h"

namespace tpud::client {
namespace {

using tpud::v1::JobStatus;
using Stub = tpud::v1::Supervisor::StubInterface;

Result FromStatus(const Session& session, const grpc::Status& status) {
  return ResultFromStatus(status, session.socket_path, session.timeout);
}

std::string CannotRead(const std::string& file, int error) {
  return "cannot read " + file + ": " + std::strerror(error);
}

// Reads a server stream to its end, calling `on_message` for each response.
// With `follow`, SIGINT cancels the call and counts as success.
template <typename Response, typename Start, typename OnMessage>
Result ReadStream(const Session& session, bool follow, Start start, OnMessage on_message) {
  grpc::ClientContext context;
  if (!follow) SetDeadline(context, session.timeout);
  std::optional<CancelOnInterrupt> interrupt;
  if (follow) interrupt.emplace(&context);
  std::unique_ptr<grpc::ClientReaderInterface<Response>> reader = start(&context);
  Response response;
  Result result;
  while (result.ok() && reader->Read(&response)) {
    result = on_message(response);
  }
  if (!result.ok()) {
    context.TryCancel();
    reader->Finish();
    return result;
  }
  const grpc::Status status = reader->Finish();
  if (interrupt && interrupt->interrupted()) return Result::Ok();
  return FromStatus(session, status);
}

// Reads all of `file` ("-": stdin) into `*contents`.
Result ReadInput(const std::string& file, std::string* contents) {
  std::ostringstream buffer;
  if (file == "-") {
    buffer << std::cin.rdbuf();
    *contents = buffer.str();
    return Result::Ok();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) return {kExitNoInput, CannotRead(file, EISDIR)};
  std::ifstream in(file, std::ios::binary);
  if (!in) return {kExitNoInput, CannotRead(file, errno)};
  buffer << in.rdbuf();
  if (in.bad()) return {kExitNoInput, CannotRead(file, errno)};
  *contents = buffer.str();
  return Result::Ok();
}

// The name tpud uses for the spec in its errors: the file's absolute path.
std::string SpecSource(const std::string& file) {
  if (file == "-") return "<stdin>";
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(file, ec);
  return ec ? file : absolute.lexically_normal().string();
}

// The line `events` prints for one item, or nothing when the query filters
// it out or this client does not know its kind.
std::optional<std::string> RenderWatchItem(const tpud::v1::WatchEventsResponse& response,
                                           const EventsQuery& query) {
  using Item = tpud::v1::WatchEventsResponse;
  switch (response.item_case()) {
    case Item::kEvent:
      if (query.incidents_only) return std::nullopt;
      return query.json ? EventJson(response.event()) : FormatEventLine(response.event());
    case Item::kIncident:
      return query.json ? IncidentJson(response.incident())
                        : FormatIncidentLine(response.incident());
    default:
      return std::nullopt;
  }
}

}  // namespace

tpud::v1::StartJobRequest ConfiguredStartRequest(const std::string& name) {
  tpud::v1::StartJobRequest request;
  request.set_name(name);
  return request;
}

Result SpecFileStartRequest(const std::string& file, tpud::v1::StartJobRequest* request) {
  std::string yaml;
  if (Result read = ReadInput(file, &yaml); !read.ok()) return read;
  request->set_spec_yaml(std::move(yaml));
  request->set_spec_source(SpecSource(file));
  return Result::Ok();
}

tpud::v1::StartJobRequest AdHocStartRequest(const std::string& name,
                                            const std::vector<std::string>& command,
                                            const std::string& working_dir) {
  tpud::v1::StartJobRequest request;
  request.set_name(name);
  tpud::v1::AdHocCommand* ad_hoc = request.mutable_ad_hoc();
  for (const std::string& word : command) ad_hoc->add_command(word);
  ad_hoc->set_working_dir(working_dir);
  return request;
}

Result StartJob(const Session& session, const tpud::v1::StartJobRequest& request) {
  tpud::v1::StartJobResponse response;
  if (Result r = Call(session, &Stub::StartJob, request, &response); !r.ok()) return r;
  return Print(session, FormatJobLine(response.job()) + "\n");
}

Result StopJob(const Session& session, const std::string& name, bool wait) {
  tpud::v1::StopJobRequest request;
  request.set_name(name);
  tpud::v1::StopJobResponse response;
  if (Result r = Call(session, &Stub::StopJob, request, &response); !r.ok()) return r;
  if (!wait || response.job().state() != tpud::v1::JOB_STATE_STOPPING) {
    return Print(session, FormatJobLine(response.job()) + "\n");
  }
  tpud::v1::JobStatus job = response.job();
  {
    ProgressLine progress(session.err, session.err_is_tty, "stopping " + name);
    while (job.state() == tpud::v1::JOB_STATE_STOPPING) {
      progress.Update(job.has_stop() ? FormatStopRung(job.stop()) : "stopping");
      std::this_thread::sleep_for(kProgressPollInterval);
      tpud::v1::GetJobRequest get;
      get.set_name(name);
      tpud::v1::GetJobResponse got;
      if (Result r = Call(session, &Stub::GetJob, get, &got); !r.ok()) return r;
      job = got.job();
    }
  }
  return Print(session, FormatJobLine(job) + "\n");
}

Result RestartJob(const Session& session, const std::string& name) {
  tpud::v1::RestartJobRequest request;
  request.set_name(name);
  tpud::v1::RestartJobResponse response;
  if (Result r = Call(session, &Stub::RestartJob, request, &response); !r.ok()) return r;
  return Print(session, FormatJobLine(response.job()) + "\n");
}

Result RemoveJob(const Session& session, const std::string& name) {
  tpud::v1::RemoveJobRequest request;
  request.set_name(name);
  tpud::v1::RemoveJobResponse response;
  if (Result r = Call(session, &Stub::RemoveJob, request, &response); !r.ok()) return r;
  return Print(session, "removed " + name + " (its logs and checkpoints are left as they are)\n");
}

Result ShowStatus(const Session& session, const std::optional<std::string>& name, bool json) {
  if (name) {
    tpud::v1::GetJobRequest request;
    request.set_name(*name);
    tpud::v1::GetJobResponse response;
    if (Result r = Call(session, &Stub::GetJob, request, &response); !r.ok()) return r;
    return Print(session, json ? JobJson(response.job()) + "\n" : FormatJobDetail(response.job()));
  }
  tpud::v1::ListJobsResponse response;
  if (Result r = Call(session, &Stub::ListJobs, tpud::v1::ListJobsRequest(), &response); !r.ok()) return r;
  const std::vector<JobStatus> jobs(response.jobs().begin(), response.jobs().end());
  return Print(session, json ? JobsJson(jobs) + "\n" : FormatStatusTable(jobs));
}

Result TailLogs(const Session& session, const std::string& job, int lines, bool follow) {
  tpud::v1::TailLogsRequest request;
  request.set_job(job);
  request.set_lines(lines);
  request.set_follow(follow);
  auto start = [&](grpc::ClientContext* context) {
    return session.stub->TailLogs(context, request);
  };
  auto print = [&](const tpud::v1::TailLogsResponse& chunk) {
    if (chunk.dropped_bytes() > 0) {
      *session.err << "tpuctl: note: " << chunk.dropped_bytes()
                   << " bytes of output skipped (this reader fell behind)" << std::endl;
    }
    return Print(session, chunk.data());
  };
  return ReadStream<tpud::v1::TailLogsResponse>(session, follow, start, print);
}

Result WatchEvents(const Session& session, const EventsQuery& query) {
  tpud::v1::WatchEventsRequest request;
  request.set_job(query.job);
  request.set_history(query.history);
  request.set_follow(query.follow);
  auto start = [&](grpc::ClientContext* context) {
    return session.stub->WatchEvents(context, request);
  };
  auto print = [&](const tpud::v1::WatchEventsResponse& response) {
    const std::optional<std::string> line = RenderWatchItem(response, query);
    if (!line) return Result::Ok();
    return Print(session, *line + "\n");
  };
  return ReadStream<tpud::v1::WatchEventsResponse>(session, query.follow, start, print);
}

Result ShowDaemonInfo(const Session& session, bool json) {
  tpud::v1::GetDaemonInfoResponse response;
  if (Result r = Call(session, &Stub::GetDaemonInfo, tpud::v1::GetDaemonInfoRequest(), &response); !r.ok()) {
    return r;
  }
  return Print(session, json ? DaemonInfoJson(response, session.socket_path) + "\n"
                             : FormatDaemonInfo(response, session.socket_path));
}

}  // namespace tpud::client
