// libFuzzer target: the failure classifier on arbitrary output. Scanning a
// block and scanning its lines one by one must reach the same verdict, and
// neither may crash or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/classify/classifier.h"
#include "daemon/core/lines.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::shared_ptr<const tpud::FailureClassifier> classifier = *tpud::FailureClassifier::Create({});
  std::string block(reinterpret_cast<const char*>(data), size);
  if (block.empty() || block.back() != '\n') block.push_back('\n');
  tpud::AttemptScanner by_block(classifier);
  by_block.ScanLines(block);
  tpud::AttemptScanner by_line(classifier);
  tpud::ForEachLine(block, [&](std::string_view line) { by_line.ScanLine(line); });
  const tpud::ExitStatus exit{1, 0, false, ""};
  const tpud::Classification a = by_block.Classify(exit, false);
  const tpud::Classification b = by_line.Classify(exit, false);
  if (a.failure_class != b.failure_class || a.rule != b.rule) __builtin_trap();
  return 0;
}
