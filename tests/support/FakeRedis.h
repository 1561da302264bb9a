// SPDX-License-Identifier: Apache-2.0
// FakeRedis.h — an in-process stand-in for one Redis node, for unit tests of what the client does
// with the server's answers: it listens on a loopback port the kernel picks, reads RESP commands
// and answers each with what the test's handler returns (TIME, every connection's handshake, it
// answers itself from this machine's clock), recording every command it got.
//
//   resp::         RESP encoders for the handler's replies
//   Answer         a reply; silence (the client's command times out); or a reset connection
//   FakeRedis      the node: one thread accepts and serves every connection
//   closedPort()   a loopback port that refuses connections
//
// Owner: one test. Thread safety: thread-safe, except stop() and the destructor, which belong to
// the owning thread. The handler runs on the node's thread, one command at a time: state it shares
// with the test needs its own lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dlock::test {

namespace resp {
std::string simple(std::string_view text);                   // +text
std::string error(std::string_view text);                    // -text
std::string integer(long long value);                        // :value
std::string bulk(std::string_view bytes);                    // $length, the bytes
std::string nil();                                           // $-1
std::string array(const std::vector<std::string>& encoded);  // *count, then the encoded elements
}  // namespace resp

// What the node does with one command.
class Answer {
 public:
  // Sends `raw`, RESP as resp:: encodes it. Implicit, so a handler returns resp::simple("OK").
  Answer(std::string raw) : kind_(Kind::Reply), raw_(std::move(raw)) {}  // NOLINT(google-explicit-constructor)
  // Answers nothing on this connection, now or later: the client's command times out.
  static Answer silence() { return Answer(Kind::Silence); }
  // Resets the connection (RST) instead of answering, as a node that went away does.
  static Answer reset() { return Answer(Kind::Reset); }

  enum class Kind { Reply, Silence, Reset };
  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] const std::string& raw() const noexcept { return raw_; }

 private:
  explicit Answer(Kind kind) : kind_(kind) {}

  Kind kind_;
  std::string raw_;
};

using Command = std::vector<std::string>;  // argv, binary-safe
using Handler = std::function<Answer(const Command&)>;

class FakeRedis {
 public:
  // Listens at once; `handler` answers every command (a throw becomes an -ERR reply).
  explicit FakeRedis(Handler handler);
  FakeRedis(const FakeRedis&) = delete;
  FakeRedis& operator=(const FakeRedis&) = delete;
  ~FakeRedis();

  [[nodiscard]] const std::string& host() const noexcept { return host_; }
  [[nodiscard]] int port() const noexcept { return port_; }
  // "127.0.0.1:<port>".
  [[nodiscard]] std::string address() const { return host_ + ":" + std::to_string(port_); }

  // Every command received so far, in the order received.
  [[nodiscard]] std::vector<Command> commands() const;
  // How many commands named `name` (any case) were received so far.
  [[nodiscard]] std::size_t count(std::string_view name) const;
  // Waits until `n` commands named `name` were received; false when `budget` ran out first.
  [[nodiscard]] bool waitFor(std::string_view name, std::size_t n,
                             std::chrono::milliseconds budget = std::chrono::seconds(30));
  // Connections accepted so far.
  [[nodiscard]] std::size_t accepted() const;

  // Closes every connection open now, as a server restarted or dropping idle clients does; returns
  // once they are closed. New connections are still accepted.
  void dropConnections();
  // Closes the listener and every connection and joins the thread: connecting is refused from then
  // on. Later calls do nothing.
  void stop();

 private:
  struct Client {
    int fd = -1;
    std::string pending;  // bytes of a command not complete yet
    bool muted = false;   // answered with silence: answers nothing more
  };

  void serve();
  // Handles what `client` sent; false when the connection is to be closed.
  bool receive(Client& client);
  void wake() const;

  const Handler handler_;
  const std::string host_ = "127.0.0.1";
  int port_ = 0;
  int listener_ = -1;
  int wakePipe_[2] = {-1, -1};  // a byte in it wakes the thread to look at the flags below

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a command was recorded, or the connections were dropped
  std::vector<Command> commands_;    // guarded by mutex_
  std::size_t accepted_ = 0;         // guarded by mutex_
  bool dropRequested_ = false;       // guarded by mutex_
  bool stopping_ = false;            // guarded by mutex_
  bool stopped_ = false;             // owning thread only
  std::thread thread_;
};

// A loopback port nothing listens on (bound by the kernel's choice, then closed): connecting to it
// is refused.
int closedPort();

}  // namespace dlock::test
