// The tpuctl TPU commands: `tpu`, `reset-tpu`, `doctor`. As in
// commands.h, each returns Result::Ok() after printing, or the failure.
#pragma once

#include <string>

#include "client/commands.h"

namespace tpud::client {

// GetTpu as FormatTpu, or TpuJson with `json`.
Result ShowTpu(const Session& session, bool json);

// ResetTpu through `backend` ("" for the node backend); prints
// FormatTpuReset. While it runs, each node state (GetTpu every
// kProgressPollInterval) goes to stderr through ProgressLine. A reset that ran and failed is kExitError with its line as
// the message. Waits as long as the reset takes (`session.timeout` is not
// applied: a node reset takes minutes); Ctrl-C stops waiting, not the reset.
Result ResetTpu(const Session& session, const std::string& backend);

// Doctor for `job` ("" for every job) as FormatDoctor. kExitError with "N
// check(s) failed" when any check failed.
Result RunDoctor(const Session& session, const std::string& job);

// `tpuctl slice`: the slice's members, leader, gangs and etcd endpoints.
Result ShowSlice(const Session& session, bool json);

}  // namespace tpud::client
