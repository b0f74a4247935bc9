#include "client/tpu_commands.h"

#include <future>

#include "client/format_slice.h"
#include "client/format_tpu.h"
#include "client/progress.h"

namespace tpud::client {
namespace {

using Stub = tpud::v1::Supervisor::StubInterface;

// What `reset-tpu` shows while it waits: the node's state and health as the
// daemon describes it now, or the reset in progress without a node backend.
std::string ResetProgress(const tpud::v1::GetTpuResponse& tpu) {
  if (tpu.has_node() && !tpu.node().state().empty()) {
    std::string text = "node " + tpu.node().state();
    if (!tpu.node().health().empty()) text += ", " + tpu.node().health();
    return text;
  }
  if (!tpu.running().empty()) return "resetting (" + tpu.running() + ")";
  return "";
}

}  // namespace

Result ShowTpu(const Session& session, bool json) {
  tpud::v1::GetTpuResponse response;
  if (Result r = Call(session, &Stub::GetTpu, tpud::v1::GetTpuRequest(), &response); !r.ok()) return r;
  return Print(session, json ? TpuJson(response) + "\n" : FormatTpu(response));
}

// A reset lasts as long as it lasts (minutes for a node stop and start): no
// deadline, and Ctrl-C ends the wait (not the reset).
Result ResetTpu(const Session& session, const std::string& backend) {
  tpud::v1::ResetTpuRequest request;
  request.set_backend(backend);
  tpud::v1::ResetTpuResponse response;
  // The reset call blocks until done (Ctrl-C cancels it); meanwhile this
  // thread asks for the node, so a wait of up to 30 minutes shows each state
  // the node goes through.
  std::future<Result> reset = std::async(std::launch::async, [&] {
    return Call(session, &Stub::ResetTpu, request, &response, CallBound::kUntilInterrupted);
  });
  {
    ProgressLine progress(session.err, session.err_is_tty, "reset-tpu");
    Session polling = session;
    polling.timeout = std::min<std::chrono::duration<double>>(session.timeout, std::chrono::seconds(5));
    std::string where;
    auto asked = std::chrono::steady_clock::now() - kNodePollInterval;  // Ask at once.
    while (reset.wait_for(kProgressPollInterval) != std::future_status::ready) {
      if (std::chrono::steady_clock::now() - asked >= kNodePollInterval) {
        asked = std::chrono::steady_clock::now();
        tpud::v1::GetTpuResponse tpu;
        if (Call(polling, &Stub::GetTpu, tpud::v1::GetTpuRequest(), &tpu).ok()) where = ResetProgress(tpu);
      }
      progress.Update(where);  // On a terminal, also the elapsed time.
    }
  }
  if (Result r = reset.get(); !r.ok()) return r;
  const std::string line = FormatTpuReset(response.reset());
  if (response.reset().attempted() && response.reset().result() != "ok") return {kExitError, line};
  return Print(session, line + "\n");
}

Result RunDoctor(const Session& session, const std::string& job) {
  tpud::v1::DoctorRequest request;
  request.set_job(job);
  tpud::v1::DoctorResponse response;
  if (Result r = Call(session, &Stub::Doctor, request, &response); !r.ok()) return r;
  if (Result printed = Print(session, FormatDoctor(response)); !printed.ok()) return printed;
  const int failed = FailedChecks(response);
  if (failed == 0) return Result::Ok();
  return {kExitError, std::to_string(failed) + (failed == 1 ? " check failed" : " checks failed")};
}

Result ShowSlice(const Session& session, bool json) {
  tpud::v1::GetSliceRequest request;
  request.set_check_endpoints(true);
  tpud::v1::GetSliceResponse response;
  if (Result r = Call(session, &Stub::GetSlice, request, &response); !r.ok()) return r;
  return Print(session, json ? SliceJson(response) + "\n" : FormatSlice(response));
}

}  // namespace tpud::client
