// Ending what is left of an attempt and waiting until it is gone, without
// blocking the event loop: the guarantee behind "no new attempt starts while a
// process of the previous one is alive" (a SIGKILLed process can take a while
// to die when it is inside a driver call).
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>

namespace tpud {

// A step kills whatever is still alive and returns true once nothing is.
using SweepStep = std::function<bool()>;

// Runs `step` now; when it returns true, calls `done` at once (inline: the
// common case, an attempt with nothing left, costs no loop turn). Otherwise
// runs it again every 10 ms (growing to 100 ms) on `io` until it returns
// true, then calls `done` there, logging a warning naming `what` every 10 s
// meanwhile. There is no time limit: an unkillable process is reported, never
// ignored. `step` and `done` must stay valid until `done` has run.
// Thread-safety: call on the thread running `io`.
void SweepUntilGone(boost::asio::io_context& io, std::string what, SweepStep step,
                    std::function<void()> done);

}  // namespace tpud
