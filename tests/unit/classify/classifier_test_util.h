// Helpers shared by the classifier tests: a classifier, exit statuses, and
// classifying a list of lines as one attempt's output.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "daemon/classify/classifier.h"

namespace tpud::testing {

inline std::shared_ptr<const FailureClassifier> MakeClassifier(std::vector<FailureRule> user_rules = {}) {
  auto classifier = FailureClassifier::Create(std::move(user_rules));
  REQUIRE(classifier.ok());
  return *classifier;
}

inline ExitStatus ExitCode(int code) {
  ExitStatus status;
  status.code = code;
  return status;
}

inline ExitStatus KilledBy(int signal) {
  ExitStatus status;
  status.signal = signal;
  return status;
}

// The verdict for an attempt that printed `lines` (one ScanLine each) and exited as `exit`.
inline Classification ClassifyLines(const std::vector<std::string>& lines,
                                    std::shared_ptr<const FailureClassifier> classifier = MakeClassifier(),
                                    const ExitStatus& exit = ExitCode(1)) {
  AttemptScanner scanner(std::move(classifier));
  for (const std::string& line : lines) scanner.ScanLine(line);
  return scanner.Classify(exit, /*hung=*/false);
}

// The verdict for `block` (lines each ending in '\n') given to ScanLines at once.
inline Classification ClassifyBlock(const std::string& block,
                                    std::shared_ptr<const FailureClassifier> classifier = MakeClassifier()) {
  AttemptScanner scanner(std::move(classifier));
  scanner.ScanLines(block);
  return scanner.Classify(ExitCode(1), /*hung=*/false);
}

}  // namespace tpud::testing
