// `tpuctl incident`: an incident bundle's summary and files, or the bundle
// packed into a tar file for a bug report.
#pragma once

#include <cstdint>
#include <string>

#include "client/call.h"
#include "tpud/v1/tpud.grpc.pb.h"

namespace tpud::client {

// The text `tpuctl incident` prints: the verdict, the processes and where
// each was blocked, what could not be captured, and the files with sizes.
std::string FormatIncidentBundle(const tpud::v1::GetIncidentResponse& bundle);

// Writes the bundle's files into the tar archive `path` (POSIX pax, through
// libarchive), each under "JOB-incident-N/". An error Result naming `path`.
Result WriteIncidentTar(const tpud::v1::GetIncidentResponse& bundle, const std::string& path);

// GetIncident for `job` and `number` (0: the newest); prints
// FormatIncidentBundle, summary.json with `json`, or with `tar_path` packs
// the files and prints where.
Result ShowIncident(const Session& session, const std::string& job, std::int64_t number, const std::string& tar_path,
                    bool json);

}  // namespace tpud::client
