#include "daemon/incident/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <re2/re2.h>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "daemon/core/errno_status.h"
#include "daemon/process/process_tree.h"
#include "daemon/tpu/command_runner.h"

namespace tpud::incident {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// At most `max_bytes` of the open `fd`, which it closes. nullopt with `error`
// set when the first read fails.
std::optional<std::string> ReadFdBounded(int fd, std::size_t max_bytes, std::string* error) {
  std::string out;
  char buf[8192];
  while (out.size() < max_bytes) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      ::close(fd);
      return out.empty() ? std::nullopt : std::optional<std::string>(out);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// Reads at most `max_bytes` of a file; /proc files report size 0, so this
// reads rather than stats. nullopt with `error` set when it cannot be opened.
std::optional<std::string> ReadBounded(const fs::path& path, std::size_t max_bytes, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  return ReadFdBounded(fd, max_bytes, error);
}

// Creates `dir` and its missing parents up to `base` as 0700: a bundle holds
// the job's environment and log, for root and (through GetIncident) its owner.
bool MakePrivateDirs(const fs::path& base, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return false;
  for (fs::path p = dir; !p.empty() && p != base && p != p.parent_path(); p = p.parent_path()) {
    ::chmod(p.c_str(), 0700);
  }
  ::chmod(base.c_str(), 0700);
  return true;
}

// Writes `text` to DIR/NAME (mode 0600, never through a link); a failure becomes a note.
void WriteFile(const fs::path& dir, const std::string& name, const std::string& text,
               std::vector<std::string>* notes) {
  const fs::path path = dir / name;
  MakePrivateDirs(dir, path.parent_path());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && WriteAll(fd, text, path).ok();
  if (fd >= 0 && ::close(fd) != 0) ok = false;
  if (!ok) notes->push_back(absl::StrCat(name, ": could not be written to ", path.string()));
}

std::string Capped(std::string text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  text.resize(max_bytes);
  text += "\n[... cut at " + std::to_string(max_bytes) + " bytes]\n";
  return text;
}

// The attempt's processes: the main one, its descendants, the members of its
// process group; at most kMaxProcesses, the main one first.
std::vector<ProcStat> AttemptProcesses(const CaptureRequest& request) {
  std::vector<ProcStat> found;
  if (request.pid <= 0) return found;
  if (!IsRunning(ProcessIdentity{request.pid, request.pid_start_ticks})) return found;
  std::set<int> seen;
  auto add = [&](const ProcStat& stat) {
    if (stat.state == 'Z' || found.size() >= kMaxProcesses || !seen.insert(stat.pid).second) return;
    found.push_back(stat);
  };
  for (const ProcStat& stat : ProcessTree(request.pid)) add(stat);
  for (const ProcStat& stat : ProcessGroupMembers(request.pid)) add(stat);
  std::stable_partition(found.begin(), found.end(), [&](const ProcStat& s) { return s.pid == request.pid; });
  return found;
}

std::string Comm(const fs::path& proc, int pid) {
  std::string error;
  std::string comm = ReadBounded(proc / std::to_string(pid) / "comm", 256, &error).value_or("");
  absl::StripTrailingAsciiWhitespace(&comm);
  return comm;
}

// Every record /dev/kmsg holds now: opened non-blocking, read to EAGAIN
// (one record per read; EPIPE: records overwritten since, skipped).
absl::StatusOr<std::vector<std::string>> ReadKmsg(const fs::path& path, std::size_t max_records) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(path.string(), ": ", std::strerror(errno)));
  std::vector<std::string> records;
  char buf[8192];
  while (records.size() < max_records) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;
    if (n <= 0) break;  // EAGAIN: no more records; a plain file: its end.
    std::string chunk(buf, static_cast<std::size_t>(n));
    // A plain file (tests) returns many records per read.
    for (absl::string_view line : absl::StrSplit(chunk, '\n', absl::SkipEmpty())) records.emplace_back(line);
  }
  ::close(fd);
  return records;
}

// Whether kernel.dmesg_restrict is on; unreadable counts as on.
bool DmesgRestricted(const fs::path& path) {
  std::string error;
  const std::optional<std::string> text = ReadBounded(path, 16, &error);
  return !text || absl::StripAsciiWhitespace(*text) != "0";
}

std::int64_t MillisecondsUntil(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

// Keeps the newest `keep` bundles of the job; tpud removes only its own
// bundle directories (never a log or a checkpoint).
void Prune(const fs::path& dir, const std::string& job, int keep, std::vector<std::string>* notes) {
  std::vector<std::int64_t> numbers = ListBundles(dir, job);
  if (keep < 1 || numbers.size() <= static_cast<std::size_t>(keep)) return;
  for (std::size_t i = 0; i + keep < numbers.size(); ++i) {
    std::error_code ec;
    fs::remove_all(dir / job / std::to_string(numbers[i]), ec);
    if (ec) notes->push_back(absl::StrCat("older bundle ", numbers[i], " could not be removed: ", ec.message()));
  }
}

}  // namespace

static bool SecretName(const std::string& name) {
  static constexpr const char* kSecretWords[] = {"TOKEN", "SECRET", "KEY",     "PASSWORD", "PASSWD",
                                                 "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "PRIVATE"};
  const std::string upper = absl::AsciiStrToUpper(name);
  if (std::any_of(std::begin(kSecretWords), std::end(kSecretWords),
                  [&](const char* word) { return upper.find(word) != std::string::npos; })) {
    return true;
  }
  // Short words only as a whole part of the name: GH_PAT, DB_PASS, not PATH.
  for (absl::string_view part : absl::StrSplit(upper, '_')) {
    if (part == "PAT" || part == "PASS" || part == "PW" || part == "PWD" || part == "CREDS") return true;
  }
  return false;
}

// A value that is a secret whatever its name: a URL with credentials
// (scheme://user:password@host, as DATABASE_URL or http_proxy carry them),
// an Authorization header's value, a token with a well-known prefix (GitHub
// ghp_/gho_/github_pat_, Slack xox?-, GitLab glpat-, AWS AKIA, Google ya29.,
// OpenAI-style sk-), or a long random-looking string (32+ characters of a
// base64 alphabet with upper and lower case and digits, or of hex digits).
static bool SecretValue(const std::string& value) {
  static const RE2 kPatterns(
      R"((?i)[a-z][a-z0-9+.-]*://[^/@\s]+@|^\s*(bearer|basic|token)\s+\S)"
      R"(|\b(ghp_|gho_|ghs_|github_pat_|xox[abposr]-|glpat-|AKIA[0-9A-Z]{12}|ya29\.|sk-[A-Za-z0-9]{16}))");
  if (RE2::PartialMatch(value, kPatterns)) return true;
  static const RE2 kRandom(R"(([A-Za-z0-9+_=-]{32,}))");
  re2::StringPiece input(value);
  std::string run;
  while (RE2::FindAndConsume(&input, kRandom, &run)) {
    const auto has = [&](int (*is)(int)) {
      return std::any_of(run.begin(), run.end(), [&](char c) { return is(static_cast<unsigned char>(c)) != 0; });
    };
    const bool hex = std::all_of(run.begin(), run.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if ((has(isupper) && has(islower) && has(isdigit)) || (hex && has(isalpha) && has(isdigit))) return true;
  }
  return false;
}

std::map<std::string, std::string> RedactEnv(const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& unredacted) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : env) {
    const bool shown = std::find(unredacted.begin(), unredacted.end(), name) != unredacted.end();
    out[name] = !shown && (SecretName(name) || SecretValue(value)) ? "<redacted>" : value;
  }
  return out;
}

std::string TailLines(const fs::path& path, std::size_t max_lines, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size <= 0) return "";  // Empty, or not seekable (a pipe, a directory).
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - max_bytes : 0;
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (start > 0) {  // Drop the partial first line.
    const std::size_t nl = text.find('\n');
    text.erase(0, nl == std::string::npos ? text.size() : nl + 1);
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  const std::size_t first = lines.size() > max_lines ? lines.size() - max_lines : 0;
  std::string out;
  for (std::size_t i = first; i < lines.size(); ++i) absl::StrAppend(&out, lines[i], "\n");
  return out;
}

std::string FormatKmsgRecords(const std::vector<std::string>& records, std::optional<std::chrono::microseconds> since) {
  std::string out;
  for (const std::string& record : records) {
    if (record.empty() || record.front() == ' ') continue;
    const std::size_t semi = record.find(';');
    if (semi == std::string::npos) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(absl::string_view(record).substr(0, semi), ',');
    std::int64_t usec = 0;
    if (fields.size() < 3 || !absl::SimpleAtoi(fields[2], &usec)) continue;
    if (since && usec < since->count()) continue;
    absl::StrAppendFormat(&out, "[%5d.%06d] %s\n", usec / 1000000, usec % 1000000, record.substr(semi + 1));
  }
  return out;
}

absl::StatusOr<CaptureResult> Capture(const CaptureRequest& request, const CaptureOptions& options) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = options.deadline.value_or(start + options.capture_seconds);
  CaptureResult result;
  result.dir = options.dir / request.job / std::to_string(request.number);
  std::error_code ec;
  std::vector<std::string>& notes = result.notes;
  if (fs::exists(result.dir / "summary.json", ec)) {
    // An earlier bundle for this number (a hang capture its attempt's exit
    // overtook, or one no incident took): kept beside the new one.
    const fs::path aside = result.dir.parent_path() /
                           absl::StrCat(request.number, ".replaced-",
                                        std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
    fs::rename(result.dir, aside, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("incident bundle ", result.dir.string(),
                                                 " exists and could not be moved aside: ", ec.message()));
    }
    notes.push_back(absl::StrCat("the bundle captured earlier for this number is in ", aside.string()));
  }
  fs::remove_all(result.dir, ec);  // A capture cut short by a tpud restart: redo it.
  if (!MakePrivateDirs(options.dir, result.dir) || !fs::is_directory(result.dir, ec)) {
    return absl::UnavailableError(absl::StrCat("incident bundle ", result.dir.string(), ": could not be created"));
  }

  nlohmann::json processes = nlohmann::json::array();
  const std::vector<ProcStat> procs = AttemptProcesses(request);
  if (request.trigger == "hang" && procs.empty()) notes.push_back("no process of the attempt was alive to capture");
  // /proc first: cheap, and it shows where each thread sleeps (wchan) even
  // when eu-stack runs out of time.
  for (const ProcStat& proc : procs) {
    const fs::path pdir = options.proc / std::to_string(proc.pid);
    nlohmann::json row = {{"pid", proc.pid}, {"ppid", proc.ppid}, {"state", std::string(1, proc.state)},
                          {"comm", Comm(options.proc, proc.pid)}};
    for (const char* file : {"status", "wchan", "stack", "cmdline"}) {
      if (proc.state == 'D' && std::string(file) == "cmdline") {
        notes.push_back(
            absl::StrCat("/proc/", proc.pid, "/cmdline: not read, the process is in uninterruptible sleep"));
        continue;
      }
      std::string error;
      std::optional<std::string> text = ReadBounded(pdir / file, kMaxProcFileBytes, &error);
      if (!text) {
        notes.push_back(absl::StrCat("/proc/", proc.pid, "/", file, ": ", error));
        continue;
      }
      if (std::string(file) == "cmdline") std::replace(text->begin(), text->end(), '\0', ' ');
      if (std::string(file) == "wchan") row["wchan"] = *text;
      WriteFile(result.dir, absl::StrCat("proc/", proc.pid, "/", file), *text, &notes);
    }
    processes.push_back(std::move(row));
  }

  // Native stacks of every thread: eu-stack attaches with ptrace, reads and
  // detaches (elfutils, eu-stack(1)); each run gets what is left of the time.
  std::string stacks;
  for (const ProcStat& proc : procs) {
    const std::int64_t left_ms = MillisecondsUntil(deadline);
    if (left_ms <= 0) {
      notes.push_back(absl::StrCat("stacks: capture_seconds (", options.capture_seconds.count(),
                                   " s) ran out before pid ", proc.pid));
      break;
    }
    if (stacks.size() >= kMaxStackBytes) {
      notes.push_back(absl::StrCat("stacks: ", kMaxStackBytes, " bytes reached before pid ", proc.pid));
      break;
    }
    if (proc.state == 'D') {
      notes.push_back(absl::StrCat("stacks of pid ", proc.pid, ": not taken, the process is in uninterruptible sleep"));
      absl::StrAppend(&stacks, "== pid ", proc.pid, " (", Comm(options.proc, proc.pid),
                      ") ==\n(not captured: in uninterruptible sleep; its wchan is in summary.json)\n\n");
      continue;
    }
    CommandOptions run;
    run.timeout = std::chrono::milliseconds(left_ms);
    run.max_output_bytes = kMaxStackBytesPerProcess;
    absl::StrAppend(&stacks, "== pid ", proc.pid, " (", Comm(options.proc, proc.pid), ") ==\n");
    absl::StatusOr<CommandResult> out = RunCommand({options.eu_stack, "-p", std::to_string(proc.pid)}, run);
    if (!out.ok()) {
      notes.push_back(absl::StrCat("stacks of pid ", proc.pid, ": ", out.status().message()));
      absl::StrAppend(&stacks, "(not captured: ", out.status().message(), ")\n\n");
      if (out.status().code() == absl::StatusCode::kNotFound) break;  // No eu-stack: install elfutils.
      continue;
    }
    absl::StrAppend(&stacks, out->stdout_text, out->stderr_text, "\n");
    if (!out->status.succeeded()) {
      notes.push_back(absl::StrCat("eu-stack -p ", proc.pid, ": ", out->status.Describe()));
    }
  }
  if (!procs.empty()) WriteFile(result.dir, "stacks.txt", Capped(stacks, kMaxStackBytes + 4096), &notes);

  const std::string tail = TailLines(request.log_path, kLogTailLines, kMaxLogTailBytes);
  if (tail.empty()) notes.push_back(absl::StrCat("log tail: nothing readable in ", request.log_path.string()));
  WriteFile(result.dir, "log-tail.txt", tail, &notes);

  std::string env_text;
  for (const auto& [name, value] : RedactEnv(request.env, request.unredacted_env)) absl::StrAppend(&env_text, name, "=", value, "\n");
  WriteFile(result.dir, "env.txt", Capped(env_text, kMaxProcFileBytes * 4), &notes);

  if (!request.tpu.empty()) WriteFile(result.dir, "tpu.txt", request.tpu, &notes);

  // The kernel log is everyone's: only for a job of root, or where any user
  // may read it anyway (kernel.dmesg_restrict=0, sysctl/kernel.rst).
  absl::StatusOr<std::vector<std::string>> kmsg =
      request.owner_uid == 0 || !DmesgRestricted(options.dmesg_restrict)
          ? ReadKmsg(options.kmsg, 100000)
          : absl::StatusOr<std::vector<std::string>>(absl::PermissionDeniedError(absl::StrCat(
                "not captured: kernel.dmesg_restrict is on and the job runs as uid ", request.owner_uid)));
  if (kmsg.ok()) {
    WriteFile(result.dir, "dmesg.txt", Capped(FormatKmsgRecords(*kmsg, request.attempt_started_monotonic),
                                              kMaxDmesgBytes), &notes);
  } else {
    notes.push_back(absl::StrCat("dmesg: ", kmsg.status().message()));
  }

  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const nlohmann::json summary = {
      {"job", request.job},
      {"incident", request.number},
      {"attempt", request.attempt},
      {"owner_uid", request.owner_uid},
      {"trigger", request.trigger},
      {"reason", request.reason},
      {"verdict",
       {{"class", request.failure_class},
        {"action", request.action},
        {"hint", request.hint},
        {"line", request.deciding_line},
        {"rule", request.rule}}},
      {"captured_unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count()},
      {"capture_seconds", result.seconds},
      {"processes", processes},
      {"tpu", request.tpu},
      {"notes", notes},
  };
  WriteFile(result.dir, "summary.json", summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
            &notes);
  Prune(options.dir, request.job, options.keep, &notes);
  return result;
}

std::vector<std::int64_t> ListBundles(const fs::path& dir, const std::string& job) {
  std::vector<std::int64_t> numbers;
  std::error_code ec;
  for (fs::directory_iterator it(dir / job, ec), end; !ec && it != end; it.increment(ec)) {
    std::int64_t n = 0;
    std::error_code exists_ec;
    if (absl::SimpleAtoi(it->path().filename().string(), &n) && n > 0 &&
        fs::exists(it->path() / "summary.json", exists_ec)) {
      numbers.push_back(n);
    }
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

absl::StatusOr<Bundle> ReadBundle(const fs::path& dir, const std::string& job, std::int64_t number) {
  const std::vector<std::int64_t> numbers = ListBundles(dir, job);
  if (number == 0) {
    if (numbers.empty()) return absl::NotFoundError(absl::StrCat("job \"", job, "\" has no incident bundle"));
    number = numbers.back();
  } else if (!std::binary_search(numbers.begin(), numbers.end(), number)) {
    return absl::NotFoundError(absl::StrCat("job \"", job, "\" has no incident bundle ", number));
  }
  Bundle bundle;
  bundle.job = job;
  bundle.number = number;
  bundle.dir = dir / job / std::to_string(number);
  std::string error;
  bundle.summary_json = ReadBounded(bundle.dir / "summary.json", 1 << 20, &error).value_or("");
  const nlohmann::json summary = nlohmann::json::parse(bundle.summary_json, nullptr, /*allow_exceptions=*/false);
  if (summary.is_object() && summary.contains("owner_uid") && summary["owner_uid"].is_number_unsigned()) {
    bundle.owner_uid = summary["owner_uid"].get<std::uint32_t>();
  }
  std::error_code ec;
  for (fs::recursive_directory_iterator it(bundle.dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!fs::is_regular_file(it->symlink_status(file_ec))) continue;  // Never what a link points to.
    const std::uint64_t size = it->file_size(file_ec);
    if (file_ec) continue;  // Gone meanwhile.
    bundle.files.push_back(BundleFile{it->path().lexically_relative(bundle.dir).string(), size});
  }
  std::sort(bundle.files.begin(), bundle.files.end(),
            [](const BundleFile& a, const BundleFile& b) { return a.name < b.name; });
  return bundle;
}

absl::StatusOr<std::string> ReadBundleFile(const Bundle& bundle, const std::string& name, std::size_t max_bytes) {
  const fs::path path = bundle.dir / name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": is a symbolic link; not read"));
    return absl::ErrnoToStatus(errno, path.string());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a regular file; not read"));
  }
  std::string error;
  std::optional<std::string> content = ReadFdBounded(fd, max_bytes, &error);
  if (!content) return absl::UnavailableError(absl::StrCat(path.string(), ": ", error));
  return *std::move(content);
}

}  // namespace tpud::incident
