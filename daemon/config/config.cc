// The config schema: which keys exist, their types and defaults. Reading
// goes through the yaml-cpp adapter (yaml_reader.h); every parsed job spec
// then goes through the validation rules (validate.h), located in the file by
// the key path the rule names.
#include "daemon/config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <span>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/core/text.h"
#include "daemon/core/limits.h"
#include "daemon/config/socket_access.h"
#include "daemon/config/slice_section.h"
#include "daemon/config/tpu_section.h"
#include "daemon/core/job_spec.h"
#include "daemon/config/yaml_reader.h"
#include "daemon/core/exit_status.h"

namespace tpud {
namespace {

namespace fs = std::filesystem;
using absl::StrCat;
using namespace config_internal;  // NOLINT: this file is the schema over the reader.

constexpr absl::string_view kTopKeys[] = {"socket",   "state_dir", "log_dir",      "metrics",
                                          "jobs_dir", "jobs",      "gce_metadata", "launcher",
                                          "stop_jobs_on_exit", "socket_group", "socket_mode", "tpu",
                                          "cgroup_root", "slice", "incidents"};
constexpr absl::string_view kJobKeys[] = {"name",      "command",       "working_dir", "env",
                                          "autostart", "start_seconds", "checkpoint",  "resume_args",
                                          "restart",   "stop",          "log",         "progress",
                                          "failure_rules", "checkpoint_signal", "user", "group", "gang",
                                          "unredacted_env"};
constexpr absl::string_view kMetricsKeys[] = {"listen"};
constexpr absl::string_view kIncidentKeys[] = {"capture", "capture_seconds", "keep", "max_bytes",
                                               "removed_keep_days"};
constexpr absl::string_view kCheckpointKeys[] = {"dir", "layout", "pattern"};
constexpr absl::string_view kRestartKeys[] = {"max_restarts", "backoff_initial_seconds",
                                              "backoff_max_seconds", "backoff_jitter", "reset_after_seconds"};
constexpr absl::string_view kStopKeys[] = {"grace_seconds", "signals"};
constexpr absl::string_view kLogKeys[] = {"max_bytes", "backups"};
constexpr absl::string_view kProgressKeys[] = {"regex", "heartbeat_file", "startup_grace_seconds",
                                               "timeout_seconds", "learn_timeout", "restore_regex"};
constexpr absl::string_view kLearnKeys[] = {"safety_factor", "min_steps"};
constexpr absl::string_view kRuleKeys[] = {"match", "class", "action", "hint"};
constexpr absl::string_view kGceKeys[] = {"enabled", "host"};

void ReadSignals(Reader& r, const YAML::Node& stop, const std::string& path, std::vector<int>* out) {
  std::vector<int> signals;
  const bool found = ForEachItem(
      r, stop, path, "signals", "signals", [&](const YAML::Node& item, const std::string& item_path) {
        const int number = item.IsScalar() ? SignalNumber(item.Scalar()) : -1;
        if (number < 0) {
          return r.Fail(item.Mark(), item_path,
                        StrCat("unknown signal ", Describe(item), " (expected e.g. SIGTERM, TERM or 15)"));
        }
        signals.push_back(number);
      });
  if (found) *out = std::move(signals);
}

void ReadEnv(Reader& r, const YAML::Node& job, const std::string& path,
             std::map<std::string, std::string>* out) {
  const std::optional<YAML::Node> env = Section(r, job, path, "env", {});
  std::size_t bytes = 0;  // Bounded: aliases could otherwise repeat one long value without end.
  for (const auto& pair : env.value_or(YAML::Node())) {
    const std::string key = Join(Join(path, "env"), pair.first.Scalar());
    if (!pair.second.IsScalar()) {
      return r.Fail(pair.first.Mark(), key, StrCat("expected a string, got ", Describe(pair.second)));
    }
    if ((bytes += pair.first.Scalar().size() + pair.second.Scalar().size() + 2) > kMaxExecBytes) {
      return r.Fail(pair.first.Mark(), Join(path, "env"), StrCat("longer than ", kMaxExecBytes, " bytes in total"));
    }
    (*out)[pair.first.Scalar()] = pair.second.Scalar();
  }
}

std::string KnownFailureClasses() {
  std::vector<std::string> names;
  for (FailureClass c : kAllFailureClasses) names.push_back(FailureClassName(c));
  return absl::StrJoin(names, ", ");
}

// A signal given by name ("SIGTERM", "TERM") or number.
void ReadSignal(Reader& r, const YAML::Node& map, const std::string& path, absl::string_view key, int* out) {
  const Entry entry = Find(map, key);
  if (!r.ok() || !entry.found) return;
  const int number = entry.value.IsScalar() ? SignalNumber(entry.value.Scalar()) : -1;
  if (number < 0) {
    return r.Fail(entry.mark, Join(path, key),
                  StrCat("unknown signal ", Describe(entry.value), " (expected e.g. SIGTERM, TERM or 15)"));
  }
  *out = number;
}

void ReadProgress(Reader& r, const YAML::Node& job, const std::string& path, const fs::path& base,
                  ProgressSpec* out) {
  const std::string where = Join(path, "progress");
  const std::optional<YAML::Node> section = Section(r, job, path, "progress", kProgressKeys);
  if (!section) return;
  out->configured = true;
  Read(r, *section, where, "regex", &out->regex);
  Read(r, *section, where, "restore_regex", &out->restore_regex);
  Read(r, *section, where, "heartbeat_file", &out->heartbeat_file);
  out->heartbeat_file = Resolve(base, out->heartbeat_file);
  Read(r, *section, where, "startup_grace_seconds", &out->startup_grace_seconds);
  Read(r, *section, where, "timeout_seconds", &out->timeout_seconds);
  if (const auto learn = Section(r, *section, where, "learn_timeout", kLearnKeys)) {
    out->learn_timeout = true;
    Read(r, *learn, Join(where, "learn_timeout"), "safety_factor", &out->safety_factor);
    Read(r, *learn, Join(where, "learn_timeout"), "min_steps", &out->min_steps);
  }
}

// failure_rules: [{match, class, action, hint}]; class and action by name.
void ReadFailureRules(Reader& r, const YAML::Node& job, const std::string& path,
                      std::vector<FailureRule>* out) {
  ForEachItem(r, job, path, "failure_rules", "rules", [&](const YAML::Node& item, const std::string& where) {
    if (!ExpectMap(r, item, item.Mark(), where, kRuleKeys)) return;
    FailureRule rule;
    std::string failure_class = "unknown", action = "restart";
    Read(r, item, where, "match", &rule.match);
    Read(r, item, where, "class", &failure_class);
    Read(r, item, where, "action", &action);
    Read(r, item, where, "hint", &rule.hint);
    if (!r.ok()) return;
    const auto parsed_class = ParseFailureClass(failure_class);
    const auto parsed_action = ParseRecoveryAction(action);
    if (!parsed_class) {
      return r.Fail(Find(item, "class").mark, Join(where, "class"),
                    StrCat("unknown class \"", failure_class, "\" (known: ", KnownFailureClasses(), ")"));
    }
    if (!parsed_action) {
      return r.Fail(Find(item, "action").mark, Join(where, "action"),
                    StrCat("unknown action \"", action,
                           "\" (known: restart, reset_and_restart, wait_and_restart, fail)"));
    }
    rule.failure_class = *parsed_class;
    rule.action = *parsed_action;
    out->push_back(std::move(rule));
  });
}

void ReadCheckpoint(Reader& r, const YAML::Node& job, const std::string& path, const fs::path& base,
                    CheckpointSpec* out) {
  const std::string where = Join(path, "checkpoint");
  const std::optional<YAML::Node> section = Section(r, job, path, "checkpoint", kCheckpointKeys);
  if (!section) return;
  Read(r, *section, where, "dir", &out->dir);
  out->dir = Resolve(base, out->dir);
  Read(r, *section, where, "pattern", &out->pattern);
  std::string layout = CheckpointLayoutName(out->layout);
  Read(r, *section, where, "layout", &layout);
  if (const std::optional<CheckpointLayout> parsed = ParseCheckpointLayout(layout)) {
    out->layout = *parsed;
    return;
  }
  std::vector<absl::string_view> known;
  for (CheckpointLayout l : {CheckpointLayout::kAuto, CheckpointLayout::kTensorflow, CheckpointLayout::kOrbax,
                             CheckpointLayout::kHuggingface, CheckpointLayout::kTorchDcp,
                             CheckpointLayout::kLightning, CheckpointLayout::kPattern}) {
    known.push_back(CheckpointLayoutName(l));
  }
  r.Fail(Find(*section, "layout").mark, Join(where, "layout"),
         StrCat("unknown layout \"", layout, "\" (known: ", absl::StrJoin(known, ", "), ")"));
}

void ReadPolicies(Reader& r, const YAML::Node& job, const std::string& path, JobSpec* spec) {
  if (const auto restart = Section(r, job, path, "restart", kRestartKeys)) {
    const std::string where = Join(path, "restart");
    Read(r, *restart, where, "max_restarts", &spec->restart.max_restarts);
    Read(r, *restart, where, "backoff_initial_seconds", &spec->restart.backoff_initial_seconds);
    Read(r, *restart, where, "backoff_max_seconds", &spec->restart.backoff_max_seconds);
    Read(r, *restart, where, "backoff_jitter", &spec->restart.backoff_jitter);
    Read(r, *restart, where, "reset_after_seconds", &spec->restart.reset_after_seconds);
  }
  if (const auto stop = Section(r, job, path, "stop", kStopKeys)) {
    Read(r, *stop, Join(path, "stop"), "grace_seconds", &spec->stop.grace_seconds);
    ReadSignals(r, *stop, Join(path, "stop"), &spec->stop.signals);
  }
  if (const auto log = Section(r, job, path, "log", kLogKeys)) {
    ReadSize(r, *log, Join(path, "log"), "max_bytes", &spec->log.max_bytes);
    Read(r, *log, Join(path, "log"), "backups", &spec->log.backups);
  }
}

// Reads the job spec `node` (at `mark`, keys prefixed by `path`) and validates it.
void ParseJobNode(Reader& r, const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                  const fs::path& base, JobSpec* spec) {
  if (!ExpectMap(r, node, mark, path, kJobKeys)) return;
  Read(r, node, path, "name", &spec->name);
  ReadStrings(r, node, path, "command", &spec->command);
  Read(r, node, path, "working_dir", &spec->working_dir);
  spec->working_dir = Resolve(base, spec->working_dir);
  ReadEnv(r, node, path, &spec->env);
  Read(r, node, path, "user", &spec->user);
  Read(r, node, path, "group", &spec->group);
  Read(r, node, path, "autostart", &spec->autostart);
  Read(r, node, path, "gang", &spec->gang);
  Read(r, node, path, "start_seconds", &spec->start_seconds);
  ReadCheckpoint(r, node, path, base, &spec->checkpoint);
  ReadStrings(r, node, path, "resume_args", &spec->resume_args);
  ReadStrings(r, node, path, "unredacted_env", &spec->unredacted_env);
  ReadPolicies(r, node, path, spec);
  ReadProgress(r, node, path, base, &spec->progress);
  ReadFailureRules(r, node, path, &spec->failure_rules);
  ReadSignal(r, node, path, "checkpoint_signal", &spec->checkpoint_signal);
  if (!r.ok()) return;
  if (const std::optional<SpecViolation> v = FindSpecViolation(*spec)) {
    r.Fail(MarkOf(node, mark, v->key), Join(path, v->key), v->reason);
  }
}

// Job names seen so far, each with the "FILE:LINE" that defined it.
using JobNames = std::map<std::string, std::string>;

void AddJob(Reader& r, const YAML::Node& node, const YAML::Mark& mark, const std::string& path, JobSpec spec,
            JobNames* names, DaemonConfig* config) {
  if (!r.ok()) return;
  const YAML::Mark name_mark = MarkOf(node, mark, "name");
  const auto [first, inserted] = names->emplace(spec.name, r.Where(name_mark));
  if (!inserted) {
    return r.Fail(name_mark, Join(path, "name"),
                  StrCat("duplicate job name \"", spec.name, "\", first defined at ", first->second));
  }
  if (spec.gang && !config->slice) {
    return r.Fail(MarkOf(node, mark, "gang"), Join(path, "gang"),
                  StrCat("job \"", spec.name, "\" is a gang job, but this tpud has no slice: section "
                         "(a gang runs on every worker of a multi-host slice, agreed through etcd)"));
  }
  spec.origin = StrCat("config:", r.source());
  config->jobs.push_back(std::move(spec));
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// A config or job file: a regular file (symlinks to one are fine) of at most
// kMaxConfigFileBytes, read without ever blocking. A FIFO once froze the event
// loop on reload: open(2) with O_NONBLOCK returns at once for one, and fstat
// then names what it is.
absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return absl::ErrnoToStatus(errno, StrCat(path.string(), ": cannot open"));
  struct stat st {};
  absl::Status status;
  std::string text;
  if (::fstat(fd, &st) != 0) {
    status = absl::ErrnoToStatus(errno, StrCat(path.string(), ": cannot stat"));
  } else if (!S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(StrCat(path.string(), ": is ", FileKind(st.st_mode),
                                               ", not a regular file"));
  } else if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigFileBytes) {
    status = absl::InvalidArgumentError(StrCat(path.string(), ": ", st.st_size, " bytes, more than the limit of ",
                                               kMaxConfigFileBytes));
  } else {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) status = absl::ErrnoToStatus(errno, StrCat(path.string(), ": cannot read"));
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    text.resize(got);
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

absl::Status ParseJobDocument(const std::string& text, const std::string& source, const fs::path& base,
                              YAML::Node* node, JobSpec* spec) {
  if (absl::Status status = LoadDocument(text, source, node); !status.ok()) return status;
  Reader r(source);
  ParseJobNode(r, *node, node->Mark(), "", base, spec);
  return r.status();
}

bool IsHostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  return colon != std::string::npos && absl::SimpleAtoi(listen.substr(colon + 1), &port) && port >= 0 &&
         port <= 65535;
}

void ReadTopLevel(Reader& r, const YAML::Node& root, const fs::path& base, DaemonConfig* config) {
  const std::pair<const char*, fs::path*> paths[] = {
      {"socket", &config->socket}, {"state_dir", &config->state_dir}, {"log_dir", &config->log_dir}};
  for (const auto& [key, path] : paths) {
    Read(r, root, "", key, path);
    if (r.ok() && path->empty()) r.Fail(Find(root, key).mark, key, "must not be empty");
    *path = Resolve(base, *path);
  }
  ReadSocketAccess(r, root, config);
  if (const auto metrics = Section(r, root, "", "metrics", kMetricsKeys)) {
    Read(r, *metrics, "metrics", "listen", &config->metrics.listen);
    const std::string& listen = config->metrics.listen;
    if (r.ok() && !listen.empty() && !IsHostPort(listen)) {
      r.Fail(Find(*metrics, "listen").mark, "metrics.listen",
             StrCat("expected host:port (port 0 picks a free one), got \"", listen, "\""));
    }
  }
  if (const auto incidents = Section(r, root, "", "incidents", kIncidentKeys)) {
    IncidentConfig& c = config->incidents;
    Read(r, *incidents, "incidents", "capture", &c.capture);
    Read(r, *incidents, "incidents", "capture_seconds", &c.capture_seconds);
    Read(r, *incidents, "incidents", "keep", &c.keep);
    ReadSize(r, *incidents, "incidents", "max_bytes", &c.max_bytes);
    Read(r, *incidents, "incidents", "removed_keep_days", &c.removed_keep_days);
    if (r.ok() && (c.removed_keep_days < 0 || c.removed_keep_days > 3650)) {
      r.Fail(Find(*incidents, "removed_keep_days").mark, "incidents.removed_keep_days",
             StrCat("must be in 0..3650, got ", c.removed_keep_days));
    }
    if (r.ok() && (c.capture_seconds < 1 || c.capture_seconds > 300)) {
      r.Fail(Find(*incidents, "capture_seconds").mark, "incidents.capture_seconds",
             StrCat("must be in 1..300, got ", c.capture_seconds));
    }
    if (r.ok() && (c.keep < 1 || c.keep > 10000)) {
      r.Fail(Find(*incidents, "keep").mark, "incidents.keep", StrCat("must be in 1..10000, got ", c.keep));
    }
  }
  if (const auto gce = Section(r, root, "", "gce_metadata", kGceKeys)) {
    Read(r, *gce, "gce_metadata", "enabled", &config->gce_metadata.enabled);
    Read(r, *gce, "gce_metadata", "host", &config->gce_metadata.host);
    const std::string& enabled = config->gce_metadata.enabled;
    if (r.ok() && enabled != "auto" && enabled != "true" && enabled != "false") {
      r.Fail(Find(*gce, "enabled").mark, "gce_metadata.enabled",
             StrCat("expected auto, true or false, got \"", enabled, "\""));
    }
  }
  Read(r, root, "", "launcher", &config->launcher);
  if (r.ok() && config->launcher != "shim" && config->launcher != "local") {
    r.Fail(Find(root, "launcher").mark, "launcher",
           StrCat("expected shim or local, got \"", config->launcher, "\""));
  }
  Read(r, root, "", "stop_jobs_on_exit", &config->stop_jobs_on_exit);
  Read(r, root, "", "cgroup_root", &config->cgroup_root);
  if (r.ok() && config->cgroup_root != "auto" && config->cgroup_root != "none" && !config->cgroup_root.empty() &&
      config->cgroup_root.front() != '/') {
    r.Fail(Find(root, "cgroup_root").mark, "cgroup_root",
           StrCat("expected auto, none or an absolute path, got \"", Truncated(config->cgroup_root), "\""));
  }
  ReadTpuSection(r, root, config);
  ReadSliceSection(r, root, base, config);
  Read(r, root, "", "jobs_dir", &config->jobs_dir);
  config->jobs_dir = Resolve(base, config->jobs_dir);
  std::error_code ec;
  if (r.ok() && !config->jobs_dir.empty() && !fs::is_directory(config->jobs_dir, ec)) {
    r.Fail(Find(root, "jobs_dir").mark, "jobs_dir", StrCat("no such directory: ", config->jobs_dir.string()));
  }
}

absl::Status ParseDaemonDocument(const std::string& text, JobNames* names, DaemonConfig* config) {
  const std::string source = config->config_path.string();
  const fs::path base = config->config_path.parent_path();
  YAML::Node root;
  if (absl::Status status = LoadDocument(text, source, &root); !status.ok()) return status;
  Reader r(source);
  if (!ExpectMap(r, root, root.Mark(), "", kTopKeys)) return r.status();
  ReadTopLevel(r, root, base, config);
  ForEachItem(r, root, "", "jobs", "job specs", [&](const YAML::Node& item, const std::string& path) {
    JobSpec spec;
    ParseJobNode(r, item, item.Mark(), path, base, &spec);
    AddJob(r, item, item.Mark(), path, std::move(spec), names, config);
  });
  return r.status();
}

absl::Status LoadJobFile(const fs::path& file, JobNames* names, DaemonConfig* config) {
  const absl::StatusOr<std::string> text = ReadFile(file);
  if (!text.ok()) return text.status();
  YAML::Node node;
  JobSpec spec;
  if (absl::Status s = ParseJobDocument(*text, file.string(), file.parent_path(), &node, &spec); !s.ok()) {
    return s;
  }
  Reader r(file.string());
  AddJob(r, node, node.Mark(), "", std::move(spec), names, config);
  return r.status();
}

// Loads the *.yaml and *.yml files of `config->jobs_dir` in file name order.
absl::Status LoadJobsDir(JobNames* names, DaemonConfig* config) {
  if (config->jobs_dir.empty()) return absl::OkStatus();
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(config->jobs_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path extension = it->path().extension();
    std::error_code entry_ec;
    if ((extension == ".yaml" || extension == ".yml") && !it->is_directory(entry_ec)) {
      files.push_back(it->path());
    }
  }
  if (ec) return absl::ErrnoToStatus(ec.value(), StrCat(config->jobs_dir.string(), ": cannot list"));
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    absl::Status status = CatchYaml(file.string(), [&] { return LoadJobFile(file, names, config); });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonConfig> LoadDaemonConfig(const fs::path& path) {
  DaemonConfig config;
  std::error_code ec;
  config.config_path = fs::absolute(path, ec).lexically_normal();
  if (ec) config.config_path = path;
  const absl::StatusOr<std::string> text = ReadFile(config.config_path);
  if (!text.ok()) return text.status();
  JobNames names;
  absl::Status status =
      CatchYaml(config.config_path.string(), [&] { return ParseDaemonDocument(*text, &names, &config); });
  if (status.ok()) status = LoadJobsDir(&names, &config);
  if (!status.ok()) return status;
  return config;
}

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& source,
                                     const fs::path& base_dir) {
  JobSpec spec;
  YAML::Node node;
  const absl::Status status =
      CatchYaml(source, [&] { return ParseJobDocument(yaml_text, source, base_dir, &node, &spec); });
  if (!status.ok()) return status;
  return spec;
}

absl::StatusOr<JobSpec> LoadJobSpecFile(const fs::path& path) {
  const absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseJobSpec(*text, path.string(), path.parent_path());
}

std::string AdHocJobSpecYaml(const JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << spec.name;
  out << YAML::Key << "command" << YAML::Value << YAML::Flow << spec.command;
  if (!spec.working_dir.empty()) out << YAML::Key << "working_dir" << YAML::Value << spec.working_dir.string();
  if (!spec.env.empty()) out << YAML::Key << "env" << YAML::Value << spec.env;
  out << YAML::EndMap;
  return out.c_str();
}

absl::StatusOr<std::string> JobSpecYamlWithIdentity(const std::string& yaml_text, const std::string& user,
                                                    const std::string& group) {
  std::string out;
  absl::Status status = CatchYaml("job spec", [&] {
    YAML::Node node = YAML::Load(yaml_text);
    if (!node.IsMap()) return absl::InvalidArgumentError("job spec: not a YAML mapping");
    node["user"] = user;
    node["group"] = group;
    YAML::Emitter emitter;
    emitter << node;
    out = emitter.c_str();
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

}  // namespace tpud
