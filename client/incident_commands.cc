#include "client/incident_commands.h"

#include <archive.h>
#include <archive_entry.h>

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tpud::client {
namespace {

std::string Size(std::uint64_t bytes) {
  std::ostringstream out;
  if (bytes < 1024) {
    out << bytes << " B";
  } else if (bytes < (1u << 20)) {
    out.precision(1);
    out << std::fixed << bytes / 1024.0 << " KiB";
  } else {
    out.precision(1);
    out << std::fixed << bytes / 1048576.0 << " MiB";
  }
  return out.str();
}

std::string Str(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string UtcTime(std::int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

std::string FormatIncidentBundle(const tpud::v1::GetIncidentResponse& bundle) {
  std::ostringstream out;
  const nlohmann::json summary = nlohmann::json::parse(bundle.summary_json(), nullptr, /*allow_exceptions=*/false);
  out << "incident " << bundle.number() << " of " << bundle.job();
  if (summary.is_object()) {
    out << ", attempt " << summary.value("attempt", 0) << " (" << Str(summary, "trigger") << ")";
    if (summary.contains("captured_unix_ms") && summary["captured_unix_ms"].is_number()) {
      out << ", captured " << UtcTime(summary["captured_unix_ms"].get<std::int64_t>());
    }
    if (summary.contains("capture_seconds") && summary["capture_seconds"].is_number()) {
      std::ostringstream took;
      took.precision(1);
      took << std::fixed << summary["capture_seconds"].get<double>();
      out << " in " << took.str() << " s";
    }
    out << "\n";
    if (!Str(summary, "reason").empty()) out << "reason:     " << Str(summary, "reason") << "\n";
    if (summary.contains("verdict") && summary["verdict"].is_object()) {
      const nlohmann::json& verdict = summary["verdict"];
      out << "verdict:    " << Str(verdict, "class") << " -> " << Str(verdict, "action");
      if (!Str(verdict, "hint").empty()) out << ": " << Str(verdict, "hint");
      out << "\n";
      if (!Str(verdict, "line").empty()) out << "line:       " << Str(verdict, "line") << "\n";
    }
    if (summary.contains("processes") && summary["processes"].is_array() && !summary["processes"].empty()) {
      out << "processes:\n";
      for (const nlohmann::json& p : summary["processes"]) {
        if (!p.is_object()) continue;
        out << "  pid " << p.value("pid", 0) << " " << Str(p, "comm") << " state " << Str(p, "state");
        if (!Str(p, "wchan").empty()) out << " waiting in " << Str(p, "wchan");
        out << "\n";
      }
    }
    if (summary.contains("notes") && summary["notes"].is_array() && !summary["notes"].empty()) {
      out << "not captured:\n";
      for (const nlohmann::json& note : summary["notes"]) {
        if (note.is_string()) out << "  " << note.get<std::string>() << "\n";
      }
    }
  } else {
    out << "\n(summary.json is unreadable)\n";
  }
  out << "files in " << bundle.dir() << ":\n";
  for (const tpud::v1::IncidentFile& file : bundle.files()) {
    out << "  " << file.name() << "  " << Size(file.size()) << "\n";
  }
  if (bundle.numbers_size() > 1) {
    out << "bundles of " << bundle.job() << ":";
    for (std::int64_t n : bundle.numbers()) out << " " << n;
    out << " (tpuctl incident " << bundle.job() << " N)\n";
  }
  return out.str();
}

Result WriteIncidentTar(const tpud::v1::GetIncidentResponse& bundle, const std::string& path) {
  std::unique_ptr<archive, decltype(&archive_write_free)> tar(archive_write_new(), archive_write_free);
  if (!tar) return {kExitError, "cannot write " + path + ": out of memory"};
  auto failed = [&](const std::string& what) {
    return Result{kExitError, "cannot write " + path + ": " + what + ": " + archive_error_string(tar.get())};
  };
  archive_write_set_format_pax_restricted(tar.get());
  if (archive_write_open_filename(tar.get(), path.c_str()) != ARCHIVE_OK) return failed("open");
  const std::string prefix = bundle.job() + "-incident-" + std::to_string(bundle.number()) + "/";
  const std::time_t now = std::time(nullptr);
  for (const tpud::v1::IncidentFile& file : bundle.files()) {
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> entry(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(entry.get(), (prefix + file.name()).c_str());
    archive_entry_set_size(entry.get(), static_cast<la_int64_t>(file.content().size()));
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_mtime(entry.get(), now, 0);
    if (archive_write_header(tar.get(), entry.get()) != ARCHIVE_OK) return failed(file.name());
    if (!file.content().empty() &&
        archive_write_data(tar.get(), file.content().data(), file.content().size()) < 0) {
      return failed(file.name());
    }
  }
  if (archive_write_close(tar.get()) != ARCHIVE_OK) return failed("close");
  return Result::Ok();
}

Result ShowIncident(const Session& session, const std::string& job, std::int64_t number, const std::string& tar_path,
                    bool json) {
  tpud::v1::GetIncidentRequest request;
  request.set_job(job);
  request.set_number(number);
  request.set_include_files(!tar_path.empty());
  tpud::v1::GetIncidentResponse response;
  if (Result r = Call(session, &tpud::v1::Supervisor::StubInterface::GetIncident, request, &response); !r.ok()) {
    return r;
  }
  if (!tar_path.empty()) {
    if (Result r = WriteIncidentTar(response, tar_path); !r.ok()) return r;
    return Print(session, "wrote incident " + std::to_string(response.number()) + " of " + job + " (" +
                              std::to_string(response.files_size()) + " files) to " + tar_path + "\n");
  }
  if (json) {
    std::string text = response.summary_json();
    if (text.empty() || text.back() != '\n') text += "\n";
    return Print(session, text);
  }
  return Print(session, FormatIncidentBundle(response));
}

}  // namespace tpud::client
