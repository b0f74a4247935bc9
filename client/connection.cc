#include "client/connection.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tpud::client {
namespace {

// grpc::StatusCode names as in grpc/doc/statuscodes.md.
std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED: return "cancelled";
    case grpc::StatusCode::UNKNOWN: return "unknown error";
    case grpc::StatusCode::ALREADY_EXISTS: return "already exists";
    case grpc::StatusCode::PERMISSION_DENIED: return "permission denied";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "resource exhausted";
    case grpc::StatusCode::FAILED_PRECONDITION: return "failed precondition";
    case grpc::StatusCode::ABORTED: return "aborted";
    case grpc::StatusCode::OUT_OF_RANGE: return "out of range";
    case grpc::StatusCode::UNIMPLEMENTED: return "not implemented by this tpud";
    case grpc::StatusCode::INTERNAL: return "internal error in tpud";
    case grpc::StatusCode::DATA_LOSS: return "data loss";
    case grpc::StatusCode::UNAUTHENTICATED: return "unauthenticated";
    default: return "rpc failed with code " + std::to_string(static_cast<int>(code));
  }
}

std::string OneLine(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '\r') continue;
    if (c == '\n') {
      out += "; ";
    } else {
      out += c;
    }
  }
  return out;
}

// "3s", "0.5s": seconds as people would type them for --timeout.
std::string SecondsText(std::chrono::duration<double> d) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%gs", d.count());
  return buffer;
}

std::string Lowercased(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// Waits for READY; false on TRANSIENT_FAILURE/SHUTDOWN or at the deadline.
bool WaitUntilReady(grpc::Channel& channel, std::chrono::system_clock::time_point deadline) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return false;
    if (!channel.WaitForStateChange(state, deadline)) return false;
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return true;
}

}  // namespace

std::optional<std::string> PredictDenial(const std::string& socket_path) {
  struct stat st {};
  if (::stat(socket_path.c_str(), &st) != 0) return std::nullopt;
  const uid_t uid = ::geteuid();
  if (uid == 0 || uid == st.st_uid || ::getegid() == st.st_gid) return std::nullopt;
  std::vector<gid_t> groups(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  groups.resize(static_cast<std::size_t>(std::max(::getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
  if (std::find(groups.begin(), groups.end(), st.st_gid) != groups.end()) return std::nullopt;
  std::string group_name = std::to_string(st.st_gid);
  if (const struct group* entry = ::getgrgid(st.st_gid)) group_name = entry->gr_name;
  return "permission denied: uid " + std::to_string(uid) + " is not root nor in group " + group_name;
}

std::string UnreachableMessage(const std::string& socket_path, const std::string& reason) {
  return "cannot reach tpud at " + socket_path + ": " + reason +
         " (is tpud running? set --socket or TPUD_SOCKET)";
}

Result ResultFromStatus(const grpc::Status& status, const std::string& socket_path,
                        std::chrono::duration<double> timeout) {
  const std::string message = OneLine(status.error_message());
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Result::Ok();
    case grpc::StatusCode::UNAVAILABLE:
      // tpud closes a connection from a peer it does not admit before gRPC
      // sees it; the client then only sees it go away.
      if (std::optional<std::string> denied = PredictDenial(socket_path)) return {kExitError, *denied};
      // tpud itself answered: it cannot carry the request out now (rpc/service.h).
      if (message.rfind("state store", 0) == 0) return {kExitError, message};
      return {
          kExitUnreachable,
          UnreachableMessage(socket_path, message.empty() ? "unavailable" : Lowercased(message))};
    case grpc::StatusCode::NOT_FOUND:
      return {kExitNotFound, message.empty() ? "not found" : message};
    case grpc::StatusCode::INVALID_ARGUMENT:
      return {kExitInvalidArgument, message.empty() ? "invalid argument" : message};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {kExitError,
              "no answer from tpud within " + SecondsText(timeout) + " (see --timeout)"};
    default:
      return {kExitError, message.empty() ? CodeName(status.error_code()) : message};
  }
}

std::string ProbeUnixSocket(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty()) return "empty socket path";
  if (path.size() >= sizeof(address.sun_path)) {
    return "socket path longer than " + std::to_string(sizeof(address.sun_path) - 1) + " bytes";
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Lowercased(std::strerror(errno));
  std::string reason;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    reason = Lowercased(std::strerror(errno));
  }
  ::close(fd);
  return reason;
}

Result Connect(const std::string& socket_path, std::chrono::duration<double> connect_timeout,
               std::shared_ptr<grpc::Channel>* channel) {
  channel->reset();
  // Probe first: an absent socket or a dead listener is reported at once and
  // with the precise errno, instead of as a gRPC connectivity state.
  if (std::string reason = ProbeUnixSocket(socket_path); !reason.empty()) {
    // EACCES: the socket's mode keeps this user out (the default 0660).
    if (std::optional<std::string> denied = PredictDenial(socket_path)) return {kExitError, *denied};
    return {kExitUnreachable, UnreachableMessage(socket_path, reason)};
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);  // `incident --tar` gets a whole bundle (capped at a few MiB) at once.
  auto candidate = grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(connect_timeout);
  if (!WaitUntilReady(*candidate, deadline)) {
    if (std::optional<std::string> denied = PredictDenial(socket_path)) return {kExitError, *denied};
    std::string reason = ProbeUnixSocket(socket_path);
    if (reason.empty()) reason = "no gRPC connection within " + SecondsText(connect_timeout);
    return {kExitUnreachable, UnreachableMessage(socket_path, reason)};
  }
  *channel = std::move(candidate);
  return Result::Ok();
}

}  // namespace tpud::client
