// Incident bundles: the evidence of a failed attempt, saved before it is gone.
//
// When tpud declares a hang it captures a bundle *before* the first stop
// signal (the stacks show which collective or syscall the trainer was stuck
// in); when an attempt fails it captures one after the exit (log tail,
// verdict, environment, TPU, kernel log). A bundle is a directory:
//
//   DIR/JOB/N/            N: the job's incident number (tpuctl incidents)
//     summary.json        what is below, the verdict, what could not be saved
//     stacks.txt          `eu-stack -p PID` of every process (elfutils), hang only
//     proc/PID/{status,wchan,stack,cmdline}   proc(5), hang only; a process in
//                         uninterruptible sleep (D) gets neither cmdline nor
//                         eu-stack, which would block on it
//     log-tail.txt        the last 200 lines of the job log
//     env.txt             the attempt's environment, secrets redacted
//     tpu.txt             the node's state, health, symptoms, when known
//     dmesg.txt           kernel log records since the attempt started, when readable,
//                         only for a job of root or with kernel.dmesg_restrict=0
//
// Directories are 0700 and files 0600, tpud's: the job's owner reads a bundle
// through GetIncident (tpuctl incidents), which checks who asks.
//
// Bounded in time (CaptureOptions::capture_seconds: stacks not captured by
// then are skipped and named in summary.json's "notes") and in size (each
// file is capped, see kMax* below; a bundle stays under about 8 MiB).
//
// Thread-safety: every function is safe from any thread; Capture blocks (up
// to capture_seconds) and must not run on the event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/incident/retention.h"

namespace tpud::incident {

inline constexpr std::size_t kLogTailLines = 200;
inline constexpr std::size_t kMaxLogTailBytes = 256 << 10;
inline constexpr std::size_t kMaxStackBytesPerProcess = 1 << 20;
inline constexpr std::size_t kMaxStackBytes = 4 << 20;
inline constexpr std::size_t kMaxProcFileBytes = 64 << 10;
inline constexpr std::size_t kMaxDmesgBytes = 256 << 10;
inline constexpr std::size_t kMaxProcesses = 32;

// What tpud knows of the failed attempt.
struct CaptureRequest {
  std::string job;
  std::int64_t number = 0;   // The incident's number within the job (Incident::id); >= 1.
  int attempt = 0;
  std::string trigger;       // "hang" (processes alive) or "exit" (they are gone).
  std::string reason;        // One line: the hang reason, or the exit ("exit code 1").
  // The classifier's verdict: class, action, hint, and the line that decided it.
  std::string failure_class, action, hint, deciding_line;
  std::string rule;          // What decided it (Classification::rule).
  // The attempt's main process; its process group and descendants are captured
  // (trigger "hang"). 0: none alive.
  int pid = 0;
  std::uint64_t pid_start_ticks = 0;  // /proc/PID/stat field 22; 0: unknown.
  std::filesystem::path log_path;
  // The environment tpud set for the attempt (LaunchSpec::env). Not read
  // from /proc/PID/environ: that read takes the process's mm lock and can
  // block on a process wedged in a page fault.
  std::map<std::string, std::string> env;
  // Names in `env` written as they are (the job spec's unredacted_env).
  std::vector<std::string> unredacted_env;
  // Who the attempt ran as, kept in summary.json ("owner_uid"): GetIncident
  // shows the bundle to that user and root only. The kernel log is captured
  // only for uid 0 or with kernel.dmesg_restrict off. Unknown: 0 (root only).
  std::uint32_t owner_uid = 0;
  // CLOCK_MONOTONIC time the attempt started (for dmesg records, which carry
  // microseconds since boot, /dev/kmsg in the kernel's ABI docs
  // Documentation/ABI/testing/dev-kmsg). nullopt: every record kept.
  std::optional<std::chrono::microseconds> attempt_started_monotonic;
  std::string tpu;           // The node as last seen, several lines; empty: unknown.
};

struct CaptureOptions {
  std::filesystem::path dir;           // state_dir/incidents.
  std::chrono::seconds capture_seconds{10};
  // When set, stacks are not taken after it (instead of start +
  // capture_seconds): the time the Job sends its stop signal, less a margin.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::string eu_stack = "eu-stack";   // Looked up in PATH.
  std::filesystem::path kmsg = "/dev/kmsg";
  std::filesystem::path dmesg_restrict = "/proc/sys/kernel/dmesg_restrict";
  std::filesystem::path proc = "/proc";
  int keep = 20;                       // Bundles kept per job; older ones are removed.
  RetentionPolicy retention;           // All bundles together (ApplyRetention, by the caller).
};

struct CaptureResult {
  std::filesystem::path dir;           // DIR/JOB/N.
  std::vector<std::string> notes;      // What could not be captured, and why.
  double seconds = 0;                  // How long the capture took.
};

// Writes the bundle for `request`. Errors (nothing usable written): the
// directory cannot be created (the message names it). A complete bundle
// already at DIR/JOB/N is never overwritten: it is moved to
// DIR/JOB/N.replaced-UNIXMS (named in the notes); one cut short (no
// summary.json, a tpud restart) is redone. Everything else that
// fails (eu-stack missing, /dev/kmsg unreadable, a process gone) becomes a
// note in the result and in summary.json.
absl::StatusOr<CaptureResult> Capture(const CaptureRequest& request, const CaptureOptions& options);

// `env` with secret-looking values replaced by "<redacted>", except the names
// in `unredacted`: by name (in any
// case, containing TOKEN, SECRET, KEY, PASSWORD, PASSWD, CREDENTIAL, AUTH,
// COOKIE, SESSION or PRIVATE, or with PAT, PASS, PW, PWD or CREDS as a whole
// "_"-separated part), and by value whatever the name (a URL with
// user:password@, a bearer/basic credential, a well-known token prefix, a
// long random-looking string).
std::map<std::string, std::string> RedactEnv(const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& unredacted = {});

// The last `max_lines` lines of the file (at most `max_bytes` of its end).
// Empty when the file cannot be read.
std::string TailLines(const std::filesystem::path& path, std::size_t max_lines, std::size_t max_bytes);

// Kernel log records (the /dev/kmsg format "PRIO,SEQ,USEC,FLAGS;TEXT") at
// or after `since` microseconds since boot, as "[   SECONDS] TEXT" lines.
// Continuation lines (starting with a space) are dropped.
std::string FormatKmsgRecords(const std::vector<std::string>& records, std::optional<std::chrono::microseconds> since);

// One bundle as stored.
struct BundleFile {
  std::string name;  // Relative to the bundle: "summary.json", "proc/123/status".
  std::uint64_t size = 0;
};
struct Bundle {
  std::string job;
  std::int64_t number = 0;
  std::filesystem::path dir;
  std::string summary_json;         // summary.json as written.
  // summary.json's owner_uid: who may read it besides root; nullopt for a
  // bundle without one (written before tpud recorded it): root only.
  std::optional<std::uint32_t> owner_uid;
  std::vector<BundleFile> files;    // Sorted by name.
};

// The numbers of `job`'s bundles under `dir`, ascending.
std::vector<std::int64_t> ListBundles(const std::filesystem::path& dir, const std::string& job);
// One bundle; `number` 0 means the newest. NotFound names what is missing.
absl::StatusOr<Bundle> ReadBundle(const std::filesystem::path& dir, const std::string& job, std::int64_t number);

// The content of `name` (one of the files ReadBundle listed) of `bundle`, at
// most `max_bytes`. Opened with O_NOFOLLOW and read only when it is a regular
// file, so a link planted in a bundle directory never makes tpud read what
// it points to. Errors: InvalidArgument for a link or anything else that is
// not a regular file, the errno's status when it cannot be opened.
absl::StatusOr<std::string> ReadBundleFile(const Bundle& bundle, const std::string& name, std::size_t max_bytes);

}  // namespace tpud::incident
