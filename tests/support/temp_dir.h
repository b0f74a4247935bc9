// A fresh directory under the system temp dir, removed with its contents:
// the one TempDir of every test.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace tpud::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tpud-test") {
    std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp " + templ);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // Writes `content` to `relative` (creating parent directories); its path.
  std::filesystem::path WriteFile(const std::string& relative, const std::string& content) const {
    const std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }
  std::filesystem::path File(const std::string& relative, const std::string& content = "") const {
    return WriteFile(relative, content);
  }
  // Creates `relative` (and its parents) as a directory; its path.
  std::filesystem::path Dir(const std::string& relative) const {
    std::filesystem::create_directories(path_ / relative);
    return path_ / relative;
  }
  // The whole content of `relative`, "" when missing.
  std::string Read(const std::string& relative) const {
    std::ifstream in(path_ / relative);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::filesystem::path path_;
};

}  // namespace tpud::testing
