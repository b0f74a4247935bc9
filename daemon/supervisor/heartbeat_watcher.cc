#include "daemon/supervisor/heartbeat_watcher.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpud {

using Mtime = std::pair<std::int64_t, long>;  // (tv_sec, tv_nsec)

struct HeartbeatWatcher::State {
  State(boost::asio::io_context& io, int fd) : descriptor(io, fd) {}
  boost::asio::posix::stream_descriptor descriptor;
  alignas(inotify_event) std::array<char, 4096> buffer{};
  std::filesystem::path file;
  std::string name;  // file.filename(), what inotify reports.
  std::optional<Mtime> last_mtime;
  Callback on_beat;
  bool stopped = false;
};

namespace {

using State = HeartbeatWatcher::State;
constexpr std::uint32_t kMask = IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO;

std::optional<Mtime> ReadMtime(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return std::nullopt;
  return Mtime{st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

absl::Status ErrnoStatus(int err, const std::string& message) {
  const std::string text = absl::StrCat(message, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(text);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(text);
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::ResourceExhaustedError(text);
    default:
      return absl::InternalError(text);
  }
}

// True when the buffer holds an event about the watched file's name.
bool MentionsFile(const State& state, std::size_t bytes) {
  std::size_t offset = 0;
  while (offset + sizeof(inotify_event) <= bytes) {
    const auto* event = reinterpret_cast<const inotify_event*>(state.buffer.data() + offset);
    if (event->len > 0 && state.name == event->name) return true;
    offset += sizeof(inotify_event) + event->len;
  }
  return false;
}

// Reports a beat when the mtime changed since the last one seen.
void CheckFile(State& state) {
  std::optional<Mtime> mtime = ReadMtime(state.file);
  if (!mtime || mtime == state.last_mtime) return;
  state.last_mtime = mtime;
  state.on_beat();
}

void ReadNext(const std::shared_ptr<State>& state) {
  state->descriptor.async_read_some(boost::asio::buffer(state->buffer),
                                    [state](const boost::system::error_code& ec, std::size_t bytes) {
                                      if (ec || state->stopped)
                                        return;  // Closed by the destructor, or a dead descriptor.
                                      if (MentionsFile(*state, bytes)) CheckFile(*state);
                                      if (!state->stopped) ReadNext(state);
                                    });
}

}  // namespace

absl::StatusOr<std::unique_ptr<HeartbeatWatcher>> HeartbeatWatcher::Start(boost::asio::io_context& io,
                                                                          std::filesystem::path file,
                                                                          Callback on_beat) {
  const std::string context = absl::StrCat("heartbeat \"", file.string(), "\"");
  std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat(context, ": inotify_init1"));
  if (::inotify_add_watch(fd, dir.c_str(), kMask | IN_ONLYDIR) < 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat(context, ": watch directory \"", dir.string(), "\""));
  }
  auto state = std::make_shared<State>(io, fd);
  state->file = std::move(file);
  state->name = state->file.filename().string();
  state->last_mtime = ReadMtime(state->file);
  state->on_beat = std::move(on_beat);
  ReadNext(state);
  return std::unique_ptr<HeartbeatWatcher>(new HeartbeatWatcher(std::move(state)));
}

HeartbeatWatcher::~HeartbeatWatcher() {
  state_->stopped = true;
  boost::system::error_code ignored;
  state_->descriptor.close(ignored);  // Cancels the pending read; its handler sees `stopped`.
}

}  // namespace tpud
