// LineSplitter::FeedBlocks: the same lines as Feed, delivered as blocks.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "daemon/process/log_file.h"

namespace tpud {
namespace {

std::vector<std::string> LinesOfBlocks(LineSplitter& splitter, const std::vector<std::string>& chunks,
                                       std::size_t* blocks = nullptr) {
  std::vector<std::string> out;
  for (const std::string& chunk : chunks) {
    splitter.FeedBlocks(chunk, [&](std::string_view block) {
      REQUIRE(!block.empty());
      REQUIRE(block.back() == '\n');
      if (blocks != nullptr) ++*blocks;
      ForEachLine(block, [&](std::string_view line) { out.emplace_back(line); });
    });
  }
  splitter.Flush([&](std::string_view line) { out.emplace_back(line); });
  return out;
}

std::vector<std::string> LinesOfFeed(LineSplitter& splitter, const std::vector<std::string>& chunks) {
  std::vector<std::string> out;
  for (const std::string& chunk : chunks) {
    splitter.Feed(chunk, [&](std::string_view line) { out.emplace_back(line); });
  }
  splitter.Flush([&](std::string_view line) { out.emplace_back(line); });
  return out;
}

TEST_CASE("Line splitter: a chunk of whole lines arrives as one block", "[log]") {
  LineSplitter splitter(64);
  std::size_t blocks = 0;
  const std::vector<std::string> lines = LinesOfBlocks(splitter, {"a\nbb\nccc\n"}, &blocks);
  CHECK(lines == std::vector<std::string>{"a", "bb", "ccc"});
  CHECK(blocks == 1);
}

TEST_CASE("Line splitter: blocks carry the same lines as Feed for any chunking", "[log]") {
  std::mt19937 random(12345);
  for (int round = 0; round < 300; ++round) {
    const std::size_t max_line = 1 + random() % 12;
    std::string stream;
    const int lines = static_cast<int>(random() % 20);
    for (int i = 0; i < lines; ++i) {
      stream.append(random() % (2 * max_line + 2), static_cast<char>('a' + i % 26));
      if (random() % 8 != 0) stream.push_back('\n');
    }
    std::vector<std::string> chunks;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t size = 1 + random() % (3 * max_line + 3);
      chunks.push_back(stream.substr(at, size));
      at += size;
    }
    LineSplitter by_block(max_line);
    LineSplitter by_line(max_line);
    INFO("max_line " << max_line << ", stream \"" << stream << "\"");
    REQUIRE(LinesOfBlocks(by_block, chunks) == LinesOfFeed(by_line, chunks));
  }
}

}  // namespace
}  // namespace tpud
