// `tpud classify [--job FILE] [--json] [--exit-code N] LOGFILE...`: the
// verdict saved logs would get, without a daemon. Operators test their own
// failure_rules against old logs with it; the corpus test scores with it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tpud {

struct ClassifyOptions {
  std::vector<std::string> log_files;  // Each is one attempt's whole output.
  std::string job_spec;                // A job spec YAML whose failure_rules apply; empty: none.
  bool json = false;                   // One JSON object per log, one per line.
  int exit_code = 1;                   // The exit status each attempt is taken to have ended with.
};

// Classifies each log (daemon/classify/classify_logs.h) with the job's
// failure_rules (if any) before the built-in rules, and writes the verdicts
// to `out` in the order given. Returns the process exit code: 0 when every
// log was classified (even as unknown); 2 when the job spec cannot be loaded
// (nothing is classified) or a log cannot be read (the others still are).
// Each error is one line on `err` naming the file, prefixed "tpud classify: ".
int RunClassifyCommand(const ClassifyOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tpud
