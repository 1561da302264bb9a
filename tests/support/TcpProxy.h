// TcpProxy.h — a loopback TCP proxy for tests that must hold back what a client sends: every
// connection accepted on port() is forwarded to the target, byte for byte, both ways. After
// holdNewConnections(), what the connections accepted from then on send is kept until
// release(), which forwards it; nothing is dropped or reordered. A side that closes closes the
// other. One thread does the I/O.
// Owner: one test. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace dlock::test {

class TcpProxy {
 public:
  TcpProxy(std::string targetHost, int targetPort);
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  ~TcpProxy();

  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] int port() const { return port_; }
  // redis://host:port of the proxy.
  [[nodiscard]] std::string uri() const { return "redis://" + host_ + ":" + std::to_string(port_); }

  // What connections accepted from now on send is held until release().
  void holdNewConnections();
  // Waits until a held connection has sent bytes containing `text` (a command name, say);
  // false when `budget` ran out first.
  [[nodiscard]] bool waitForHeld(std::string_view text, std::chrono::milliseconds budget);
  // Forwards everything held, and holds nothing more.
  void release();

 private:
  struct Link {
    int client = -1;
    int server = -1;
    bool held = false;
    std::string heldBytes;
  };

  void run();
  void accept();
  void wake() const;

  const std::string targetHost_;
  const int targetPort_;
  const std::string host_ = "127.0.0.1";
  int port_ = 0;
  int listenFd_ = -1;
  int wakeFd_ = -1;

  std::mutex mutex_;
  std::condition_variable changed_;  // held bytes arrived
  std::list<Link> links_;            // guarded by mutex_
  bool holdNew_ = false;             // guarded by mutex_
  bool releaseRequested_ = false;    // guarded by mutex_
  bool stopping_ = false;            // guarded by mutex_
  std::thread thread_;
};

}  // namespace dlock::test
