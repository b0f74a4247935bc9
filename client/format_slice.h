// tpuctl's views of a multi-host slice (daemon config `slice:`): the gang
// part of a gang job's detail and JSON, and `tpuctl slice`.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "tpud/v1/tpud.pb.h"

namespace tpud::client {

// The gang lines of `tpuctl status NAME` for a gang job: generation, phase,
// reason, restarts, who the gang waits for, then one row per worker (WORKER,
// HOST, TPUD up/lost, STATE, GEN, ATTEMPT, PID, STEP, REASON).
std::string FormatGang(const tpud::v1::GangStatus& gang);

// `tpuctl slice`: the slice, this worker, the leader, etcd; the members
// (worker, host, up/lost, tpud version, leader); each gang's generation and
// phase; and each etcd endpoint's health when asked.
std::string FormatSlice(const tpud::v1::GetSliceResponse& slice);
// `tpuctl slice --json`: the same as one JSON object.
std::string SliceJson(const tpud::v1::GetSliceResponse& slice);

}  // namespace tpud::client
