// SPDX-License-Identifier: Apache-2.0
#include "FakeRedis.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace dlock::test {

namespace resp {

std::string simple(std::string_view text) { return "+" + std::string(text) + "\r\n"; }
std::string error(std::string_view text) { return "-" + std::string(text) + "\r\n"; }
std::string integer(long long value) { return ":" + std::to_string(value) + "\r\n"; }
std::string bulk(std::string_view bytes) {
  return "$" + std::to_string(bytes.size()) + "\r\n" + std::string(bytes) + "\r\n";
}
std::string nil() { return "$-1\r\n"; }
std::string array(const std::vector<std::string>& encoded) {
  std::string out = "*" + std::to_string(encoded.size()) + "\r\n";
  for (const auto& element : encoded) out += element;
  return out;
}

}  // namespace resp

namespace {

// TIME's reply, from this machine's clock: seconds and microseconds, as Redis answers it.
std::string timeReply() {
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const std::string seconds = std::to_string(now / 1000000);
  const std::string micros = std::to_string(now % 1000000);
  return "*2\r\n$" + std::to_string(seconds.size()) + "\r\n" + seconds + "\r\n$" + std::to_string(micros.size()) +
         "\r\n" + micros + "\r\n";
}

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("fake redis: " + what + ": " + std::strerror(errno));
}

// A loopback socket bound to a port the kernel picks; its port in `port`.
int bindLoopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    fail("bind");
  }
  port = ntohs(address.sin_port);
  return fd;
}

bool sendAll(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t sent = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    done += static_cast<std::size_t>(sent);
  }
  return true;
}

// Reads "<digits>\r\n" at `at`, moving past it; nullopt when not all there yet. Throws when malformed.
std::optional<long long> numberLine(const std::string& buffer, std::size_t& at) {
  const auto end = buffer.find("\r\n", at);
  if (end == std::string::npos) return std::nullopt;
  long long value = 0;
  const auto [ptr, ec] = std::from_chars(buffer.data() + at, buffer.data() + end, value);
  if (ec != std::errc() || ptr != buffer.data() + end || value < 0) throw std::runtime_error("bad length");
  at = end + 2;
  return value;
}

// Takes one command (an array of bulk strings, as every client library sends) off the front of
// `buffer`; nullopt when it is not complete yet. Throws on anything else.
std::optional<Command> takeCommand(std::string& buffer) {
  if (buffer.empty()) return std::nullopt;
  if (buffer[0] != '*') throw std::runtime_error("not a command array");
  std::size_t at = 1;
  const auto count = numberLine(buffer, at);
  if (!count) return std::nullopt;
  Command argv;
  for (long long i = 0; i < *count; ++i) {
    if (at >= buffer.size()) return std::nullopt;
    if (buffer[at] != '$') throw std::runtime_error("not a bulk string");
    ++at;
    const auto length = numberLine(buffer, at);
    if (!length) return std::nullopt;
    const auto size = static_cast<std::size_t>(*length);
    if (buffer.size() < at + size + 2) return std::nullopt;
    if (buffer.compare(at + size, 2, "\r\n") != 0) throw std::runtime_error("bulk string not terminated");
    argv.emplace_back(buffer, at, size);
    at += size + 2;
  }
  buffer.erase(0, at);
  return argv;
}

bool sameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

FakeRedis::FakeRedis(Handler handler) : handler_(std::move(handler)) {
  if (::pipe2(wakePipe_, O_CLOEXEC | O_NONBLOCK) != 0) fail("pipe");
  listener_ = bindLoopback(port_);
  if (::listen(listener_, 64) != 0) fail("listen");
  thread_ = std::thread([this] { serve(); });
}

FakeRedis::~FakeRedis() {
  stop();
  ::close(wakePipe_[0]);
  ::close(wakePipe_[1]);
}

void FakeRedis::wake() const {
  const char byte = 'w';
  (void)!::write(wakePipe_[1], &byte, 1);
}

void FakeRedis::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  ::close(listener_);
  changed_.notify_all();
}

void FakeRedis::dropConnections() {
  std::unique_lock<std::mutex> guard(mutex_);
  if (stopping_) return;
  dropRequested_ = true;
  wake();
  changed_.wait(guard, [this] { return !dropRequested_; });
}

std::vector<Command> FakeRedis::commands() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return commands_;
}

std::size_t FakeRedis::count(std::string_view name) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return static_cast<std::size_t>(std::count_if(commands_.begin(), commands_.end(), [&](const Command& command) {
    return !command.empty() && sameName(command.front(), name);
  }));
}

bool FakeRedis::waitFor(std::string_view name, std::size_t n, std::chrono::milliseconds budget) {
  std::unique_lock<std::mutex> guard(mutex_);
  return changed_.wait_for(guard, budget, [&] {
    const auto seen = std::count_if(commands_.begin(), commands_.end(), [&](const Command& command) {
      return !command.empty() && sameName(command.front(), name);
    });
    return static_cast<std::size_t>(seen) >= n;
  });
}

std::size_t FakeRedis::accepted() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return accepted_;
}

void FakeRedis::serve() {
  std::vector<Client> clients;  // this thread's only
  const auto closeAll = [&] {
    for (const auto& client : clients) ::close(client.fd);
    clients.clear();
  };
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_) break;
      if (dropRequested_) {
        closeAll();
        dropRequested_ = false;
        changed_.notify_all();
      }
    }
    std::vector<pollfd> polled = {{wakePipe_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    for (const auto& client : clients) polled.push_back(pollfd{client.fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (polled[0].revents != 0) {
      char drained[64];
      while (::read(wakePipe_[0], drained, sizeof drained) > 0) {
      }
    }
    // Clients first, by index into `polled`; the ones to close go after the loop.
    std::vector<int> closing;
    for (std::size_t i = 0; i < clients.size(); ++i) {
      if (polled[i + 2].revents != 0 && !receive(clients[i])) closing.push_back(clients[i].fd);
    }
    clients.erase(std::remove_if(clients.begin(), clients.end(),
                                 [&](const Client& client) {
                                   if (std::find(closing.begin(), closing.end(), client.fd) == closing.end()) {
                                     return false;
                                   }
                                   ::close(client.fd);
                                   return true;
                                 }),
                  clients.end());
    if (polled[1].revents != 0) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        clients.push_back(Client{fd, {}, false});
        std::lock_guard<std::mutex> guard(mutex_);
        ++accepted_;
      }
    }
  }
  closeAll();
}

bool FakeRedis::receive(Client& client) {
  char chunk[16 * 1024];
  const ssize_t got = ::recv(client.fd, chunk, sizeof chunk, 0);
  if (got < 0 && errno == EINTR) return true;
  if (got <= 0) return false;
  client.pending.append(chunk, static_cast<std::size_t>(got));
  while (true) {
    std::optional<Command> command;
    try {
      command = takeCommand(client.pending);
    } catch (const std::exception&) {
      return false;  // not RESP a client sends: hang up, as Redis does on a protocol error
    }
    if (!command) return true;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      commands_.push_back(*command);
    }
    changed_.notify_all();
    if (client.muted) continue;
    Answer answer = resp::error("ERR fake handler gave no answer");
    try {
      // TIME (each connection's handshake) is the fake's own clock; the rest is the handler's.
      answer = command->size() == 1 && (*command)[0] == "TIME" ? timeReply() : handler_(*command);
    } catch (const std::exception& error) {
      answer = resp::error(std::string("ERR fake handler threw: ") + error.what());
    }
    switch (answer.kind()) {
      case Answer::Kind::Reply:
        if (!sendAll(client.fd, answer.raw())) return false;
        break;
      case Answer::Kind::Silence:
        client.muted = true;
        break;
      case Answer::Kind::Reset: {
        const linger abortive{1, 0};  // close() sends RST rather than FIN
        (void)::setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive);
        return false;
      }
    }
  }
}

int closedPort() {
  int port = 0;
  ::close(bindLoopback(port));
  return port;
}

}  // namespace dlock::test
