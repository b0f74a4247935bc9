// Throughput of the failure classifier's hot path: AttemptScanner::ScanLine
// over realistic training output, with every built-in rule on.
//
// Usage: tpud_bench_classifier [total_megabytes]   (default 200)
// Prints, in "name: value unit" form:
//   classifier_throughput: X MB/s     (MB = 10^6 bytes of line text, '\n' excluded)
//   classifier_lines: Y lines/s
//   classifier_allocations: Z allocs   (operator new calls during the timed run:
//                                       only the rare matching lines allocate)
//   classifier_block_throughput: W MB/s  (the same lines as ~64 KiB blocks, as
//                                         launchers deliver output: ScanLines)
// The verdict for the whole run goes to stderr; it must be builtin:connection_lost
// (a lost connection is a symptom, which outranks the generic Check failed
// lines), else the exit status is 1.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "daemon/classify/classifier.h"

// Counts allocations to back the header's "no allocation per line" claim.
std::atomic<std::size_t> g_allocations{0};

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

constexpr std::size_t kPoolLines = 100'000;  // Distinct lines, cycled through.
constexpr std::size_t kMatchEvery = 20'000;  // One line in this many matches a rule.

// ~100-byte lines as trainers print them: mostly step/loss lines, some INFO
// chatter, and now and then a line that matches a symptom or generic rule (so
// the scanner never holds the best possible rank and every line goes through
// the set).
std::vector<std::string> MakeTrainingOutput() {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::string> lines;
  lines.reserve(kPoolLines);
  char buffer[256];
  for (std::size_t i = 0; i < kPoolLines; ++i) {
    if (i % kMatchEvery == kMatchEvery - 1) {
      lines.push_back(i % (2 * kMatchEvery) == kMatchEvery - 1
                          ? "E0410 12:00:01.123456 4242 client.cc:88] UNAVAILABLE: Socket closed"
                          : "F0410 12:00:01.123456 4242 tpu_program.cc:55] Check failed: ok");
    } else if (i % 50 == 0) {
      std::snprintf(buffer, sizeof buffer,
                    "I0410 12:%02zu:%02zu.%06zu 4242 checkpoint_manager.cc:312] Saved checkpoint "
                    "for step %zu to gs://bucket/run-17/ckpt",
                    i / 60 % 60, i % 60, i * 7919 % 1000000, i);
      lines.push_back(buffer);
    } else {
      std::snprintf(buffer, sizeof buffer,
                    "step=%zu loss=%.4f lr=%.3e grad_norm=%.3f tokens/s=%d mfu=%.2f "
                    "elapsed=%.1fs data_wait=%.3fs",
                    i, 2.5 * unit(rng), 3e-4 * unit(rng), 4 * unit(rng),
                    40000 + static_cast<int>(10000 * unit(rng)), unit(rng), 0.3 * i, unit(rng));
      lines.push_back(buffer);
    }
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  const double total_megabytes = argc > 1 ? std::atof(argv[1]) : 200.0;
  auto classifier = tpud::FailureClassifier::Create({});
  if (!classifier.ok()) {
    std::fprintf(stderr, "classifier: %s\n", std::string(classifier.status().message()).c_str());
    return 1;
  }
  const std::vector<std::string> lines = MakeTrainingOutput();
  const auto target_bytes = static_cast<std::size_t>(total_megabytes * 1e6);

  tpud::AttemptScanner scanner(*classifier);
  std::size_t bytes = 0;
  std::size_t count = 0;
  const std::size_t allocations_before = g_allocations.load();
  const auto start = std::chrono::steady_clock::now();
  while (bytes < target_bytes) {
    for (const std::string& line : lines) {
      scanner.ScanLine(line);
      bytes += line.size();
    }
    count += lines.size();
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  const std::size_t allocations = g_allocations.load() - allocations_before;

  // The same text as blocks of whole lines of up to 64 KiB (a shim frame).
  std::vector<std::string> blocks(1);
  for (const std::string& line : lines) {
    if (blocks.back().size() + line.size() + 1 > 64 * 1024) blocks.emplace_back();
    blocks.back().append(line).push_back('\n');
  }
  tpud::AttemptScanner block_scanner(*classifier);
  std::size_t block_bytes = 0;
  const auto block_start = std::chrono::steady_clock::now();
  while (block_bytes < target_bytes) {
    for (const std::string& block : blocks) {
      block_scanner.ScanLines(block);
      block_bytes += block.size();
    }
  }
  const std::chrono::duration<double> block_elapsed = std::chrono::steady_clock::now() - block_start;

  tpud::ExitStatus exit;
  exit.code = 1;
  const tpud::Classification verdict = scanner.Classify(exit, false);
  const tpud::Classification block_verdict = block_scanner.Classify(exit, false);
  std::fprintf(stderr, "classifier_bench: %zu lines, %.1f MB in %.3f s; verdict %s (%s)\n", count,
               bytes / 1e6, elapsed.count(), verdict.rule.c_str(),
               tpud::FailureClassName(verdict.failure_class));
  std::printf("classifier_throughput: %.1f MB/s\n", bytes / 1e6 / elapsed.count());
  std::printf("classifier_lines: %.0f lines/s\n", count / elapsed.count());
  std::printf("classifier_allocations: %zu allocs\n", allocations);
  std::printf("classifier_block_throughput: %.1f MB/s\n", block_bytes / 1e6 / block_elapsed.count());
  return verdict.rule == "builtin:connection_lost" && block_verdict.rule == verdict.rule ? 0 : 1;
}
