// FaultProxy.h — a TCP proxy on a free loopback port in front of a test's server, passing bytes
// both ways, that can lose one reply on demand: it forwards the next request, waits until the
// server has answered (so the command ran), then closes that connection without passing the
// answer on. The client sees its connection die after the command ran and before its reply: the
// window no timing trick hits reliably. One thread per connection; all joined on destruction.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

class FaultProxy {
 public:
  FaultProxy(std::string targetHost, int targetPort);
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;
  ~FaultProxy();

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string uri() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // The next request a client sends runs on the server, and its reply is lost with the connection.
  void loseNextReply();
  // True once a reply was lost as asked (the server had answered); false when `budget` passed.
  [[nodiscard]] bool waitReplyLost(std::chrono::milliseconds budget = std::chrono::seconds(10));
  // Closes every connection open now, as a network that drops idle connections does; returns
  // once they are closed.
  void dropConnections();

 private:
  void accept();
  void pump(int client);

  const std::string targetHost_;
  const int targetPort_;
  int listener_ = -1;
  int port_ = 0;
  int stopPipe_[2] = {-1, -1};  // readable once the proxy stops: wakes every thread

  std::atomic<bool> armed_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  bool replyLost_ = false;               // guarded by mutex_
  std::vector<int> open_;                // guarded by mutex_; client sockets of live connections
  std::vector<std::thread> pumps_;       // guarded by mutex_
  std::thread acceptor_;
};

}  // namespace dlock::test
