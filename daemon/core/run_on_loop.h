// Calling into the event loop from another thread (gRPC handlers, metrics scrapes).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <type_traits>

namespace tpud {

// Runs `fn` on the thread running `io` and returns its result, blocking the
// caller until then. Must not be called from that thread (it would deadlock),
// nor after `io` stopped running.
template <typename Fn>
auto RunOnLoop(boost::asio::io_context& io, Fn&& fn) -> std::invoke_result_t<Fn&> {
  std::packaged_task<std::invoke_result_t<Fn&>()> task(std::forward<Fn>(fn));
  auto result = task.get_future();
  boost::asio::post(io, [&task] { task(); });
  return result.get();
}

}  // namespace tpud
