#include "FaultProxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dlock::test {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("fault proxy: " + what + ": " + std::strerror(errno)); }

bool sendAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<std::size_t>(sent);
  }
  return true;
}

// Waits until one of `fds` is readable or `stop` is; the index of the readable one, -1 on stop.
int waitReadable(const std::vector<int>& fds, int stop, int timeoutMillis = -1) {
  std::vector<pollfd> polled;
  for (const int fd : fds) polled.push_back(pollfd{fd, POLLIN, 0});
  polled.push_back(pollfd{stop, POLLIN, 0});
  while (true) {
    const int ready = ::poll(polled.data(), polled.size(), timeoutMillis);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 || polled.back().revents != 0) return -1;
    for (std::size_t i = 0; i + 1 < polled.size(); ++i) {
      if (polled[i].revents != 0) return static_cast<int>(i);
    }
  }
}

}  // namespace

FaultProxy::FaultProxy(std::string targetHost, int targetPort)
    : targetHost_(std::move(targetHost)), targetPort_(targetPort) {
  if (::pipe(stopPipe_) != 0) fail("pipe");
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    fail("listen");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept(); });
}

FaultProxy::~FaultProxy() {
  const char stop = 's';
  (void)!::write(stopPipe_[1], &stop, 1);  // never read: stays readable for every thread
  acceptor_.join();
  std::vector<std::thread> pumps;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    pumps.swap(pumps_);
  }
  for (auto& pump : pumps) pump.join();
  ::close(listener_);
  ::close(stopPipe_[0]);
  ::close(stopPipe_[1]);
}

void FaultProxy::loseNextReply() { armed_ = true; }

bool FaultProxy::waitReplyLost(std::chrono::milliseconds budget) {
  std::unique_lock<std::mutex> guard(mutex_);
  return changed_.wait_for(guard, budget, [this] { return replyLost_; });
}

void FaultProxy::dropConnections() {
  std::unique_lock<std::mutex> guard(mutex_);
  for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);  // its pump sees the end and closes it
  changed_.wait(guard, [this] { return open_.empty(); });
}

void FaultProxy::accept() {
  while (waitReadable({listener_}, stopPipe_[0]) == 0) {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    std::lock_guard<std::mutex> guard(mutex_);
    open_.push_back(client);
    pumps_.emplace_back([this, client] { pump(client); });
  }
}

void FaultProxy::pump(int client) {
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(targetPort_));
  ::inet_pton(AF_INET, targetHost_.c_str(), &address.sin_addr);
  bool connected = server >= 0 && ::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  char buffer[16384];
  while (connected) {
    const int ready = waitReadable({client, server}, stopPipe_[0]);
    if (ready < 0) break;
    const int from = ready == 0 ? client : server;
    const int to = ready == 0 ? server : client;
    const ssize_t got = ::recv(from, buffer, sizeof buffer, 0);
    if (got <= 0 || !sendAll(to, buffer, static_cast<std::size_t>(got))) break;
    if (from == client && armed_.exchange(false)) {
      // The request is on its way: wait for the server's answer, which proves it ran, and drop
      // it with the connection.
      const bool answered = waitReadable({server}, stopPipe_[0], 10000) == 0 && ::recv(server, buffer, sizeof buffer, 0) > 0;
      std::lock_guard<std::mutex> guard(mutex_);
      replyLost_ = answered;
      changed_.notify_all();
      break;
    }
  }
  if (server >= 0) ::close(server);
  std::lock_guard<std::mutex> guard(mutex_);
  open_.erase(std::remove(open_.begin(), open_.end(), client), open_.end());
  ::close(client);
  changed_.notify_all();
}

}  // namespace dlock::test
