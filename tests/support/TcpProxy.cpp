#include "TcpProxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace dlock::test {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("test proxy: " + what + ": " + std::strerror(errno));
}

// Writes all of `bytes`; false when the peer is gone.
bool sendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(std::string targetHost, int targetPort)
    : targetHost_(std::move(targetHost)), targetPort_(targetPort) {
  listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listenFd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&address), &length) != 0 || ::listen(listenFd_, 64) != 0) {
    ::close(listenFd_);
    fail("listen");
  }
  port_ = ntohs(address.sin_port);
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) {
    ::close(listenFd_);
    fail("eventfd");
  }
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  for (const Link& link : links_) {
    ::close(link.client);
    ::close(link.server);
  }
  ::close(listenFd_);
  ::close(wakeFd_);
}

void TcpProxy::holdNewConnections() {
  std::lock_guard<std::mutex> guard(mutex_);
  holdNew_ = true;
}

bool TcpProxy::waitForHeld(std::string_view text, std::chrono::milliseconds budget) {
  std::unique_lock<std::mutex> guard(mutex_);
  return changed_.wait_for(guard, budget, [&] {
    for (const Link& link : links_) {
      if (link.held && link.heldBytes.find(text) != std::string::npos) return true;
    }
    return false;
  });
}

void TcpProxy::release() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    holdNew_ = false;
    releaseRequested_ = true;
  }
  wake();
}

void TcpProxy::wake() const {
  const std::uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof one);
}

void TcpProxy::accept() {
  const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<std::uint16_t>(targetPort_));
  if (server < 0 || ::inet_pton(AF_INET, targetHost_.c_str(), &target.sin_addr) != 1 ||
      ::connect(server, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
    if (server >= 0) ::close(server);
    ::close(client);  // the client sees the target refuse, as it would without the proxy
    return;
  }
  const int on = 1;
  (void)::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  (void)::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  std::lock_guard<std::mutex> guard(mutex_);
  links_.push_back(Link{client, server, holdNew_, {}});
}

void TcpProxy::run() {
  std::vector<pollfd> fds;
  char buffer[16384];
  while (true) {
    fds.clear();
    fds.push_back({wakeFd_, POLLIN, 0});
    fds.push_back({listenFd_, POLLIN, 0});
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_) return;
      if (releaseRequested_) {
        releaseRequested_ = false;
        for (Link& link : links_) {
          if (!link.held) continue;
          link.held = false;
          (void)sendAll(link.server, link.heldBytes);  // a failure shows as the server side closing
          link.heldBytes.clear();
        }
      }
      for (const Link& link : links_) {
        fds.push_back({link.client, POLLIN, 0});
        fds.push_back({link.server, POLLIN, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      (void)!::read(wakeFd_, &count, sizeof count);
    }
    if ((fds[1].revents & POLLIN) != 0) accept();

    std::lock_guard<std::mutex> guard(mutex_);
    // Links accepted just now come after the ones polled, so fds[2 + 2i] is links_[i]'s client.
    std::size_t index = 2;
    for (auto it = links_.begin(); it != links_.end() && index < fds.size(); index += 2) {
      Link& link = *it;
      bool open = true;
      if ((fds[index].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        const ssize_t got = ::recv(link.client, buffer, sizeof buffer, 0);
        if (got <= 0) {
          open = false;
        } else if (link.held) {
          link.heldBytes.append(buffer, static_cast<std::size_t>(got));
          changed_.notify_all();
        } else {
          open = sendAll(link.server, std::string_view(buffer, static_cast<std::size_t>(got)));
        }
      }
      if (open && (fds[index + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        const ssize_t got = ::recv(link.server, buffer, sizeof buffer, 0);
        open = got > 0 && sendAll(link.client, std::string_view(buffer, static_cast<std::size_t>(got)));
      }
      if (open) {
        ++it;
      } else {
        ::close(link.client);
        ::close(link.server);
        it = links_.erase(it);
      }
    }
  }
}

}  // namespace dlock::test
