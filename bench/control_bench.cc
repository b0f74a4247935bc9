// Control-plane latency: one persistent gRPC channel to tpud's unix socket,
// then N status RPCs back to back, timed one by one.
//
//   tpud_bench_control SOCKET [N] [JOB]
//
// With JOB: GetJob(JOB) (what `tpuctl status JOB` asks); without: ListJobs
// (what `tpuctl status` asks). Prints, as `name: value unit` lines,
//   control_rpc_p50 / control_rpc_p99 / control_rpc_max : milliseconds
// after 100 warm-up calls (channel connect, first allocations). Exit 1 when an
// RPC fails (the status is printed).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tpud/v1/tpud.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const std::size_t index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[index];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: tpud_bench_control SOCKET [N] [JOB]\n");
    return 2;
  }
  const std::string socket = argv[1];
  const int n = argc >= 3 ? std::atoi(argv[2]) : 10000;
  const std::string job = argc >= 4 ? argv[3] : "";
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = tpud::v1::Supervisor::NewStub(channel);

  auto call = [&]() -> grpc::Status {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (job.empty()) {
      tpud::v1::ListJobsResponse response;
      return stub->ListJobs(&context, tpud::v1::ListJobsRequest(), &response);
    }
    tpud::v1::GetJobRequest request;
    request.set_name(job);
    tpud::v1::GetJobResponse response;
    return stub->GetJob(&context, request, &response);
  };

  for (int i = 0; i < 100; ++i) {
    if (grpc::Status s = call(); !s.ok()) {
      std::fprintf(stderr, "rpc failed: %s\n", s.error_message().c_str());
      return 1;
    }
  }
  std::vector<double> millis;
  millis.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const Clock::time_point start = Clock::now();
    grpc::Status s = call();
    millis.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!s.ok()) {
      std::fprintf(stderr, "rpc failed: %s\n", s.error_message().c_str());
      return 1;
    }
  }
  std::printf("control_rpc_p50: %.4f ms\n", Percentile(millis, 0.50));
  std::printf("control_rpc_p99: %.4f ms\n", Percentile(millis, 0.99));
  std::printf("control_rpc_max: %.4f ms\n", *std::max_element(millis.begin(), millis.end()));
  return 0;
}
