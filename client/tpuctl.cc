// The command line of tpuctl; the only client file that includes CLI11.
#include "client/tpuctl.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/commands.h"
#include "client/completion.h"
#include "client/incident_commands.h"
#include "client/connection.h"
#include "client/tpu_commands.h"

#ifndef TPUD_VERSION
#define TPUD_VERSION "0.1.0-dev"
#endif

namespace tpud::client {
namespace {

constexpr std::chrono::duration<double> kMaxConnectTimeout{3};

constexpr char kFooter[] = R"(Environment:
  TPUD_SOCKET   socket path when --socket is not given (default /run/tpud/tpud.sock)

Exit codes:
  0 ok (also when Ctrl-C ends `logs -f` or `events -f`), 1 other error,
  2 tpud unreachable, 3 no such job, 4 request rejected as invalid,
  64 usage error, 66 input file unreadable

Run 'tpuctl COMMAND --help' for a command's arguments.)";

constexpr char kStartFooter[] = R"(Examples:
  tpuctl start digits            start the job configured as "digits"
  tpuctl start -f job.yaml       submit the spec in job.yaml (its name comes from the file;
                                 with NAME too, tpud checks that they match)
  tpuctl start scratch -- python3 train.py --steps 100
                                 run a command as the ad hoc job "scratch", in the current
                                 directory, without a shell (everything after -- is argv))";

// --timeout must be a positive number of seconds.
CLI::Validator PositiveSeconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double seconds = 0;
        if (!CLI::detail::lexical_cast(text, seconds) || !(seconds > 0)) {
          return "must be a positive number of seconds, got " + text;
        }
        return {};
      },
      "", "positive seconds");
}

// Everything the command line can say, filled in by CLI11.
struct Options {
  std::string socket_path = kDefaultSocketPath;
  double timeout_seconds = 10;
  std::string job;                  // NAME, where a command takes one.
  std::string spec_file;            // start -f FILE.
  bool json = false;
  bool follow = false;
  bool wait = false;                // stop --wait.
  bool incidents_only = false;      // events --incidents.
  int lines = -1;                   // logs -n; < 0: the daemon's default.
  int history = 0;                  // events -n; 0: all the daemon kept.
  bool has_ad_hoc = false;          // A "--" was given...
  std::vector<std::string> ad_hoc;  // ...followed by this argv.
  std::string backend;              // reset-tpu --backend.
  std::string shell;                // completion SHELL.
  std::int64_t incident = 0;        // incident N; 0: the newest.
  std::string tar_file;             // incident --tar FILE.
};

void AddGlobalOptions(CLI::App& app, Options& options) {
  app.add_option("--socket", options.socket_path, "tpud's unix socket")
      ->envname("TPUD_SOCKET")
      ->capture_default_str()
      ->type_name("PATH");
  app.add_option("--timeout", options.timeout_seconds,
                 "Deadline for each call (connecting waits at most 3 s)")
      ->check(PositiveSeconds())
      ->capture_default_str()
      ->type_name("SECONDS");
  app.set_version_flag("--version", std::string("tpuctl ") + TPUD_VERSION);
}

void AddJobCommands(CLI::App& app, Options& options) {
  CLI::App* start = app.add_subcommand("start", "Start a configured, submitted or ad hoc job");
  start->add_option("NAME", options.job, "Job name")->type_name("");
  start->add_option("-f,--file", options.spec_file, "Job spec YAML to submit ('-' for stdin)")
      ->type_name("FILE");
  start->footer(kStartFooter);
  CLI::App* stop = app.add_subcommand("stop", "Stop a job (walks its stop signal ladder)");
  stop->add_option("NAME", options.job, "Job name")->type_name("")->required();
  stop->add_flag("-w,--wait", options.wait, "Wait until it has stopped, showing each rung of the ladder");
  app.add_subcommand("restart", "Stop a job if it runs, then start a new attempt")
      ->add_option("NAME", options.job, "Job name")
      ->type_name("")
      ->required();
  app.add_subcommand("remove", "Forget a stopped submitted or ad hoc job (keeps its logs and checkpoints)")
      ->add_option("NAME", options.job, "Job name")
      ->type_name("")
      ->required();
}

void AddViewCommands(CLI::App& app, Options& options) {
  CLI::App* status = app.add_subcommand("status", "Show all jobs as a table, or one job in detail");
  status->add_option("NAME", options.job, "Only this job")->type_name("");
  status->add_flag("--json", options.json, "JSON: an object for NAME, else an array");
  CLI::App* logs = app.add_subcommand("logs", "Print a job's output (stdout and stderr)");
  logs->add_option("NAME", options.job, "Job name")->type_name("")->required();
  logs->add_flag("-f,--follow", options.follow, "Keep printing new output until Ctrl-C");
  logs->add_option("-n,--lines", options.lines, "Last N lines first (default 10)")
      ->type_name("N");
  CLI::App* events =
      app.add_subcommand("events", "Print job state changes and incidents, one per line");
  events->add_option("NAME", options.job, "Only this job")->type_name("");
  events->add_flag("-f,--follow", options.follow, "Keep printing new events until Ctrl-C");
  events->add_flag("--json", options.json,
                   "One JSON object per line, \"type\": \"transition\" or \"incident\"");
  events->add_flag("--incidents", options.incidents_only,
                   "Only incidents (failures and their recovery), not state changes");
  events->add_option("-n,--history", options.history, "Past events first (default: all kept)")
      ->type_name("N");
  CLI::App* incident =
      app.add_subcommand("incident", "Show an incident bundle: stacks, log tail and verdict of a failed attempt");
  incident->add_option("NAME", options.job, "Job name")->type_name("")->required();
  incident->add_option("N", options.incident, "Incident number (default: the newest bundle)")
      ->type_name("")
      ->check(CLI::PositiveNumber);
  incident->add_option("--tar", options.tar_file, "Pack the bundle into FILE for a bug report")->type_name("FILE");
  incident->add_flag("--json", options.json, "summary.json as captured");
  CLI::App* info = app.add_subcommand("info", "Show the daemon's version, pid, metrics and config");
  info->add_flag("--json", options.json, "As a JSON object");
}

// The TPU.
void AddTpuCommands(CLI::App& app, Options& options) {
  app.add_subcommand("tpu", "Show the TPU node's state, health and symptoms, and recent resets")
      ->add_flag("--json", options.json, "As a JSON object");
  app.add_subcommand("reset-tpu", "Reset the TPU now and wait until it is done")
      ->add_option("--backend", options.backend,
                   "api, gcloud or local (default: the configured node backend, else local)")
      ->type_name("B");
  app.add_subcommand("doctor", "Check the TPU the way tpud does before each attempt, with fixes")
      ->add_option("NAME", options.job, "Only this job")
      ->type_name("");
  app.add_subcommand("slice", "Show the slice: members, leader, each gang's generation, etcd health")
      ->add_flag("--json", options.json, "As a JSON object");
}

// Shell completion scripts, and the job names they ask for.
void AddCompletionCommands(CLI::App& app, Options& options) {
  app.add_subcommand("completion", "Print the completion script for SHELL: source <(tpuctl completion bash)")
      ->add_option("SHELL", options.shell, "bash or zsh")
      ->type_name("")
      ->required()
      ->check(CLI::IsMember(kCompletionShells));
  app.add_subcommand(kCompleteJobsCommand, "")->group("");  // Hidden (no group): for the scripts only.
}

void BuildCli(CLI::App& app, Options& options) {
  app.fallthrough();  // Before adding commands: they inherit it, so global flags go anywhere.
  AddGlobalOptions(app, options);
  AddJobCommands(app, options);
  AddViewCommands(app, options);
  AddTpuCommands(app, options);
  AddCompletionCommands(app, options);
  app.require_subcommand(0, 1);
  app.footer(kFooter);
}

// The flags and positional arguments of `options`, for the completion scripts.
void DescribeOptions(const std::vector<const CLI::Option*>& options, std::vector<CompletionFlag>* flags,
                     CompletionCommand* command) {
  for (const CLI::Option* option : options) {
    if (option->get_positional()) {
      if (command == nullptr) continue;
      if (option->get_name() == "NAME") command->takes_job = true;
      if (option->get_name() == "SHELL") command->choices = kCompletionShells;
      continue;
    }
    CompletionFlag flag;
    for (const std::string& name : option->get_snames()) flag.names.push_back("-" + name);
    for (const std::string& name : option->get_lnames()) flag.names.push_back("--" + name);
    flag.help = option->get_description();
    if (option->get_type_size() != 0) flag.value = option->get_type_name();
    flags->push_back(std::move(flag));
  }
}

// What tpuctl accepts, from the CLI11 app itself, so the scripts cannot drift.
CompletionSpec DescribeCli(const CLI::App& app) {
  CompletionSpec spec;
  spec.version = TPUD_VERSION;
  DescribeOptions(app.get_options(), &spec.global_flags, nullptr);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty()) continue;  // Hidden.
    CompletionCommand command;
    command.name = sub->get_name();
    command.help = sub->get_description();
    DescribeOptions(sub->get_options(), &command.flags, &command);
    spec.commands.push_back(std::move(command));
  }
  return spec;
}

Result PrintCompletion(const CLI::App& app, const std::string& shell) {
  const CompletionSpec spec = DescribeCli(app);
  std::cout << (shell == "zsh" ? ZshCompletion(spec) : BashCompletion(spec)) << std::flush;
  if (!std::cout) return {kExitError, "cannot write output"};
  return Result::Ok();
}

std::string Chosen(const CLI::App& app) {
  const auto chosen = app.get_subcommands();
  return chosen.empty() ? "" : chosen.front()->get_name();
}

// Takes "--" and what follows out of argv (CLI11 would treat them as more
// positionals); returns the arguments left for CLI11.
std::vector<const char*> SplitAdHoc(int argc, char** argv, Options& options) {
  std::vector<const char*> args(argv, argv + argc);
  auto dash = std::find_if(args.begin() + std::min(argc, 1), args.end(),
                           [](const char* arg) { return std::string_view(arg) == "--"; });
  if (dash == args.end()) return args;
  options.has_ad_hoc = true;
  options.ad_hoc.assign(dash + 1, args.end());
  args.erase(dash, args.end());
  return args;
}

// CLI11's error text is one line; make it ours and point to --help. A word
// left over before any command was recognised is taken as a mistyped command.
Result UsageError(const CLI::App& app, const CLI::ParseError& error) {
  const std::vector<std::string> extras = app.remaining();
  if (Chosen(app).empty() && dynamic_cast<const CLI::ExtrasError*>(&error) && !extras.empty()) {
    return {kExitUsage, "unknown command '" + extras.front() + "' (see tpuctl --help)"};
  }
  const std::string what = error.what();
  std::string help = "tpuctl";
  for (const CLI::App* sub : app.get_subcommands()) help += " " + sub->get_name();
  return {kExitUsage, what + " (see " + help + " --help)"};
}

// Checks what CLI11 cannot express for `start` and builds its request.
Result PrepareStart(const Options& options, tpud::v1::StartJobRequest* request) {
  if (options.has_ad_hoc) {
    if (!options.spec_file.empty()) return {kExitUsage, "start -f FILE takes no -- CMD"};
    if (options.job.empty()) return {kExitUsage, "start NAME -- CMD: NAME is required"};
    if (options.ad_hoc.empty()) return {kExitUsage, "start NAME --: CMD is missing after --"};
    std::error_code ec;
    const std::filesystem::path cwd = std::filesystem::current_path(ec);
    if (ec) return {kExitError, "cannot get the current directory: " + ec.message()};
    *request = AdHocStartRequest(options.job, options.ad_hoc, cwd.string());
    return Result::Ok();
  }
  if (!options.spec_file.empty()) {
    Result read = SpecFileStartRequest(options.spec_file, request);
    request->set_name(options.job);  // If given, tpud checks it matches the file's name.
    return read;
  }
  if (options.job.empty()) return {kExitUsage, "start needs NAME, -f FILE or NAME -- CMD"};
  *request = ConfiguredStartRequest(options.job);
  return Result::Ok();
}

Result Dispatch(const std::string& command, const Options& options,
                const tpud::v1::StartJobRequest& start_request, const Session& session) {
  const std::optional<std::string> name =
      options.job.empty() ? std::nullopt : std::optional(options.job);
  if (command == "start") return StartJob(session, start_request);
  if (command == "stop") return StopJob(session, options.job, options.wait);
  if (command == "restart") return RestartJob(session, options.job);
  if (command == "remove") return RemoveJob(session, options.job);
  if (command == "status") return ShowStatus(session, name, options.json);
  if (command == "logs") return TailLogs(session, options.job, options.lines, options.follow);
  if (command == "events") {
    return WatchEvents(session, {options.job, options.history, options.follow, options.json,
                                 options.incidents_only});
  }
  if (command == "info") return ShowDaemonInfo(session, options.json);
  if (command == "tpu") return ShowTpu(session, options.json);
  if (command == "reset-tpu") return ResetTpu(session, options.backend);
  if (command == "doctor") return RunDoctor(session, options.job);
  if (command == "slice") return ShowSlice(session, options.json);
  if (command == "incident") return ShowIncident(session, options.job, options.incident, options.tar_file, options.json);
  if (command == kCompleteJobsCommand) return PrintJobNames(session);
  return {kExitUsage, "unknown command " + command};
}

// Everything after a successful parse: validate, connect, run.
Result Run(const std::string& command, const Options& options) {
  if (options.has_ad_hoc && command != "start") {
    return {kExitUsage, "'-- CMD' is only accepted by start (see tpuctl start --help)"};
  }
  tpud::v1::StartJobRequest start_request;
  if (command == "start") {
    if (Result prepared = PrepareStart(options, &start_request); !prepared.ok()) return prepared;
  }
  const std::chrono::duration<double> timeout{options.timeout_seconds};
  std::shared_ptr<grpc::Channel> channel;
  Result connected = Connect(options.socket_path, std::min(timeout, kMaxConnectTimeout), &channel);
  if (!connected.ok()) return connected;
  const auto stub = tpud::v1::Supervisor::NewStub(channel);
  const Session session{stub.get(), options.socket_path, timeout, &std::cout, &std::cerr,
                        ::isatty(STDERR_FILENO) == 1};
  return Dispatch(command, options, start_request, session);
}

int Report(const Result& result) {
  if (!result.ok()) std::cerr << "tpuctl: " << result.message << std::endl;
  return result.exit_code;
}

}  // namespace

int RunTpuctl(int argc, char** argv) {
  Options options;
  CLI::App app("tpuctl: control tpud, the supervisor of Cloud TPU training jobs", "tpuctl");
  BuildCli(app, options);
  const std::vector<const char*> args = SplitAdHoc(argc, argv, options);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::Success& done) {  // --help, --version.
    return app.exit(done);
  } catch (const CLI::ParseError& error) {
    return Report(UsageError(app, error));
  }
  const std::string command = Chosen(app);
  if (command.empty()) return Report({kExitUsage, "missing COMMAND (see tpuctl --help)"});
  if (command == "completion") return Report(PrintCompletion(app, options.shell));
  const Result result = Run(command, options);
  return command == kCompleteJobsCommand ? kExitOk : Report(result);  // Completion prints no errors.
}

}  // namespace tpud::client
