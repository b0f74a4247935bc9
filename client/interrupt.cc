#include "client/interrupt.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace tpud::client {
namespace {

constexpr char kInterrupted = 'i';
constexpr char kQuit = 'q';

// The self-pipe; only touched by the handler through async-signal-safe calls.
volatile sig_atomic_t g_write_fd = -1;
int g_read_fd = -1;

void OnSigint(int /*signal*/) {
  const int saved_errno = errno;
  const int fd = g_write_fd;
  if (fd >= 0) {
    const char byte = kInterrupted;
    [[maybe_unused]] ssize_t ignored = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

CancelOnInterrupt::CancelOnInterrupt(grpc::ClientContext* context) : context_(context) {
  struct sigaction current {};
  // An ignored SIGINT (e.g. a background job of a script) stays ignored.
  if (::sigaction(SIGINT, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) return;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  g_read_fd = fds[0];
  g_write_fd = fds[1];
  struct sigaction action {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  watcher_ = std::thread([this] { WatchPipe(); });
  installed_ = ::sigaction(SIGINT, &action, &previous_action_) == 0;
}

CancelOnInterrupt::~CancelOnInterrupt() {
  if (installed_) ::sigaction(SIGINT, &previous_action_, nullptr);
  const int write_fd = g_write_fd;
  g_write_fd = -1;
  if (write_fd < 0) return;
  const char byte = kQuit;
  while (::write(write_fd, &byte, 1) < 0 && errno == EINTR) {
  }
  if (watcher_.joinable()) watcher_.join();
  ::close(write_fd);
  ::close(g_read_fd);
  g_read_fd = -1;
}

void CancelOnInterrupt::WatchPipe() {
  for (;;) {
    char byte = 0;
    const ssize_t n = ::read(g_read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == kQuit) return;
    interrupted_.store(true);
    context_->TryCancel();
  }
}

}  // namespace tpud::client
