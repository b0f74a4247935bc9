#include "daemon/app/classify_command.h"

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "daemon/classify/classifier.h"
#include "daemon/classify/classify_logs.h"
#include "daemon/config/config.h"

namespace tpud {
namespace {

absl::StatusOr<std::shared_ptr<const FailureClassifier>> LoadClassifier(const std::string& job_spec) {
  if (job_spec.empty()) return FailureClassifier::Create({});
  absl::StatusOr<JobSpec> spec = LoadJobSpecFile(job_spec);
  if (!spec.ok()) return spec.status();
  return FailureClassifier::Create(std::move(spec->failure_rules));
}

}  // namespace

int RunClassifyCommand(const ClassifyOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::shared_ptr<const FailureClassifier>> classifier = LoadClassifier(options.job_spec);
  if (!classifier.ok()) {
    err << "tpud classify: " << classifier.status().message() << "\n";
    return 2;
  }
  ExitStatus exit;
  exit.code = options.exit_code;
  int status = 0;
  bool first = true;
  for (const std::string& file : options.log_files) {
    absl::StatusOr<LogVerdict> verdict = ClassifyLogFile(file, *classifier, exit);
    if (!verdict.ok()) {
      err << "tpud classify: " << verdict.status().message() << "\n";
      status = 2;
      continue;
    }
    if (options.json) {
      out << LogVerdictJson(*verdict) << "\n";
    } else {
      out << (first ? "" : "\n") << FormatLogVerdict(*verdict);
    }
    first = false;
  }
  return status;
}

}  // namespace tpud
