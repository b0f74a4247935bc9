// The real-line corpus: every labelled line real TPU jobs printed
// (tests/data/real-tpu-errors.tsv: class, line, source) classified alone, and
// every multi-line excerpt (tests/data/real-tpu-bursts.txt) classified as one
// attempt. Fails on any wrong class, naming the source; prints per-class
// precision and recall and the action accuracy (the README quotes them):
//   build/tests/tpud_unit_tests "[corpus]"
#include <catch2/catch.hpp>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/classify/classifier_test_util.h"

namespace tpud {
namespace {

using testing::ClassifyLines;
using testing::MakeClassifier;

struct Sample {
  std::string label;               // The expected class name.
  std::vector<std::string> lines;  // One attempt's output.
  std::string source;
};

std::vector<Sample> ReadTsv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<Sample> samples;
  std::string row;
  std::getline(in, row);  // Header: class, line, source.
  while (std::getline(in, row)) {
    if (row.empty()) continue;
    const std::size_t tab1 = row.find('\t');
    const std::size_t tab2 = row.rfind('\t');
    REQUIRE(tab1 != std::string::npos);
    REQUIRE(tab2 > tab1);
    samples.push_back({row.substr(0, tab1), {row.substr(tab1 + 1, tab2 - tab1 - 1)}, row.substr(tab2 + 1)});
  }
  return samples;
}

std::vector<Sample> ReadBursts(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<Sample> samples;
  std::string row;
  while (std::getline(in, row)) {
    if (row.rfind("### ", 0) == 0) {
      std::istringstream header(row.substr(4));
      Sample sample;
      header >> sample.label >> sample.source;
      samples.push_back(sample);
    } else if (!samples.empty()) {
      samples.back().lines.push_back(row);
    }
  }
  return samples;
}

// The action every built-in rule of the class takes.
RecoveryAction DefaultAction(const std::string& label) {
  if (label == "hbm_oom" || label == "user_error") return RecoveryAction::kFail;
  if (label == "preemption") return RecoveryAction::kWaitAndRestart;
  if (label == "device_busy" || label == "hardware" || label == "deadline_exceeded") {
    return RecoveryAction::kResetAndRestart;
  }
  return RecoveryAction::kRestart;
}

struct Tally {
  int labelled = 0, predicted = 0, correct = 0;
};

void PrintScores(const std::map<std::string, Tally>& tallies, int samples, int right_class,
                 int right_action) {
  std::cout << "\nFailure corpus: " << samples << " samples (tests/data/real-tpu-errors.tsv lines + "
            << "real-tpu-bursts.txt excerpts)\n"
            << std::left << std::setw(19) << "class" << std::right << std::setw(9) << "labelled"
            << std::setw(11) << "precision" << std::setw(8) << "recall" << "\n";
  for (const auto& [name, t] : tallies) {
    std::cout << std::left << std::setw(19) << name << std::right << std::setw(9) << t.labelled
              << std::fixed << std::setprecision(3) << std::setw(11)
              << (t.predicted ? static_cast<double>(t.correct) / t.predicted : 1.0) << std::setw(8)
              << (t.labelled ? static_cast<double>(t.correct) / t.labelled : 1.0) << "\n";
  }
  std::cout << "class accuracy " << right_class << "/" << samples << ", action accuracy "
            << right_action << "/" << samples << "\n";
}

TEST_CASE("Corpus: every real line and excerpt gets its labelled class", "[classify][corpus]") {
  std::vector<Sample> samples = ReadTsv(TPUD_FAILURE_CORPUS);
  const std::vector<Sample> bursts = ReadBursts(TPUD_FAILURE_BURSTS);
  REQUIRE(samples.size() >= 100);
  REQUIRE(bursts.size() >= 15);
  samples.insert(samples.end(), bursts.begin(), bursts.end());

  const auto classifier = MakeClassifier();
  std::map<std::string, Tally> tallies;
  int right_class = 0, right_action = 0;
  for (const Sample& sample : samples) {
    const Classification verdict = ClassifyLines(sample.lines, classifier);
    const std::string got = FailureClassName(verdict.failure_class);
    INFO(sample.source << "\n  " << sample.lines.front() << "\n  decided by " << verdict.rule);
    CHECK(got == sample.label);
    ++tallies[sample.label].labelled;
    ++tallies[got].predicted;
    if (got == sample.label) ++tallies[got].correct, ++right_class;
    if (verdict.action == DefaultAction(sample.label)) ++right_action;
  }
  PrintScores(tallies, static_cast<int>(samples.size()), right_class, right_action);
}

TEST_CASE("Corpus: every sample names a known class and a public source", "[classify][corpus]") {
  std::vector<Sample> samples = ReadTsv(TPUD_FAILURE_CORPUS);
  const std::vector<Sample> bursts = ReadBursts(TPUD_FAILURE_BURSTS);
  samples.insert(samples.end(), bursts.begin(), bursts.end());
  std::set<std::string> classes_seen;
  for (const Sample& sample : samples) {
    INFO(sample.source << ": " << sample.label);
    CHECK(ParseFailureClass(sample.label).has_value());
    CHECK(sample.source.rfind("https://", 0) == 0);
    CHECK_FALSE(sample.lines.empty());
    classes_seen.insert(sample.label);
  }
  for (const char* name : {"connection", "cpu_fallback", "crash", "deadline_exceeded", "device_busy",
                           "hardware", "hbm_oom", "preemption", "unknown", "user_error"}) {
    CHECK(classes_seen.count(name) == 1);
  }
}

}  // namespace
}  // namespace tpud
