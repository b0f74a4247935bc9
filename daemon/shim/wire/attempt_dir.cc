#include "daemon/core/errno_status.h"
#include "daemon/shim/wire/attempt_dir.h"

#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/core/job_spec.h"
#include "daemon/shim/wire/json_fields.h"

namespace tpud::shim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ENOSPC, EMFILE and the like are Unavailable: the launch is retried.
absl::Status ErrnoError(const fs::path& path, const char* step, int err) {
  return ErrnoStatus(err, absl::StrCat(path.string(), ": ", step));
}

absl::StatusOr<json> ParseJsonObject(std::string_view text, const std::string& source) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  return parsed;
}

json RunAsToJson(const std::optional<RunAs>& run_as) {
  if (!run_as) return nullptr;
  return json{{"uid", run_as->uid},
              {"gid", run_as->gid},
              {"groups", run_as->groups},
              {"user", run_as->user},
              {"home", run_as->home.string()}};
}


}  // namespace

absl::StatusOr<fs::path> AttemptDir(const fs::path& state_dir, std::string_view job, int attempt) {
  if (absl::Status valid = CheckJobName("attempt dir: job", absl::string_view(job.data(), job.size())); !valid.ok()) {
    return valid;  // The one job-name rule also keeps a name a single path component.
  }
  fs::path dir = state_dir / "attempts" / std::string(job) / std::to_string(attempt);
  if ((dir / kSocketFile).string().size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attempt dir: socket path ", (dir / kSocketFile).string(), " is longer than ",
                     sizeof(sockaddr_un::sun_path) - 1, " bytes; use a shorter state_dir"));
  }
  return dir;
}

std::vector<fs::path> ListAttemptDirs(const fs::path& state_dir) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const fs::directory_entry& job : fs::directory_iterator(state_dir / "attempts", ec)) {
    std::error_code job_ec;
    for (const fs::directory_entry& attempt : fs::directory_iterator(job.path(), job_ec)) {
      std::error_code file_ec;
      if (fs::exists(attempt.path() / kSpecFile, file_ec)) dirs.push_back(attempt.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

absl::Status WriteFileAtomically(const fs::path& path, std::string_view content) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError(tmp, "open", errno);
  absl::Status written = WriteAll(fd, content, tmp);
  ::close(fd);
  if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    written = ErrnoError(path, "rename", errno);
  }
  if (!written.ok()) {
    ::unlink(tmp.c_str());
  }
  return written;
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path.string(), ": not found"));
    return ErrnoError(path, "open", err);
  }
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

absl::StatusOr<std::string> SpecToJson(const LaunchSpec& spec) {
  try {
    return json{{"job", spec.job},
                {"attempt", spec.attempt},
                {"argv", spec.argv},
                {"env", spec.env},
                {"clean_environment", spec.clean_environment},
                {"working_dir", spec.working_dir.string()},
                {"log_path", spec.log_path.string()},
                {"log_max_bytes", spec.log_max_bytes},
                {"log_backups", spec.log_backups},
                {"cgroup", spec.cgroup.string()},
                {"run_as", RunAsToJson(spec.run_as)}}
        .dump(2);
  } catch (const json::exception& e) {  // Not UTF-8: a trainer's argv must be exact.
    return absl::InvalidArgumentError(absl::StrCat("spec of job ", spec.job, ": ", e.what()));
  }
}

absl::StatusOr<LaunchSpec> ReadSpecFile(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseSpecJson(*text, path.string());
}

absl::StatusOr<LaunchSpec> ParseSpecJson(std::string_view text, const std::string& source) {
  absl::StatusOr<json> parsed = ParseJsonObject(text, source);
  if (!parsed.ok()) return parsed.status();
  try {
    LaunchSpec spec;
    spec.job = parsed->value("job", std::string());
    spec.attempt = IntField<int>(*parsed, "attempt", 0);
    spec.argv = parsed->at("argv").get<std::vector<std::string>>();
    spec.env = parsed->value("env", std::map<std::string, std::string>());
    spec.clean_environment = parsed->value("clean_environment", false);
    spec.working_dir = parsed->at("working_dir").get<std::string>();
    spec.log_path = parsed->at("log_path").get<std::string>();
    spec.log_max_bytes = IntField<std::uint64_t>(*parsed, "log_max_bytes", spec.log_max_bytes);
    spec.log_backups = IntField<int>(*parsed, "log_backups", spec.log_backups);
    spec.cgroup = parsed->value("cgroup", std::string());
    if (parsed->contains("run_as") && parsed->at("run_as").is_object()) {
      const json& who = parsed->at("run_as");
      RunAs run_as;
      run_as.uid = IntField<std::uint32_t>(who, "uid");
      run_as.gid = IntField<std::uint32_t>(who, "gid");
      run_as.groups = IntListField<std::uint32_t>(who, "groups");
      run_as.user = who.value("user", std::string());
      run_as.home = who.value("home", std::string("/"));
      spec.run_as = std::move(run_as);
    }
    return spec;
  } catch (const std::exception& e) {  // json::exception, or IntField's invalid_argument.
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

std::string ShimStateToJson(const ShimState& state) {
  return json{{"protocol", state.protocol},
              {"shim_pid", state.shim_pid},
              {"trainer_pid", state.trainer_pid},
              {"shim_start_ticks", state.shim_start_ticks},
              {"trainer_start_ticks", state.trainer_start_ticks},
              {"cgroup", state.cgroup}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<ShimState> ReadStateFile(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseStateJson(*text, path.string());
}

absl::StatusOr<ShimState> ParseStateJson(std::string_view text, const std::string& source) {
  absl::StatusOr<json> parsed = ParseJsonObject(text, source);
  if (!parsed.ok()) return parsed.status();
  try {
    ShimState state;
    state.protocol = IntField<int>(*parsed, "protocol", 0);
    state.shim_pid = IntField<int>(*parsed, "shim_pid", -1);
    state.trainer_pid = IntField<int>(*parsed, "trainer_pid");
    state.shim_start_ticks = IntField<std::uint64_t>(*parsed, "shim_start_ticks", 0);
    state.trainer_start_ticks = IntField<std::uint64_t>(*parsed, "trainer_start_ticks", 0);
    state.cgroup = parsed->value("cgroup", std::string());
    return state;
  } catch (const std::exception& e) {  // json::exception, or IntField's invalid_argument.
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

}  // namespace tpud::shim
