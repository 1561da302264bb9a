// Connection.h — one hiredis connection to one Redis server: connect timeout, command timeout,
// TCP keep-alive, AUTH (password or ACL user + password), SELECT db.
//
// Commands go as binary-safe argv (redisAppendCommandArgv), never through a format string.
// An I/O error, EOF, protocol error or timeout throws ConnectionError and marks the connection
// broken(): hiredis contexts are not reused after an error. Error *replies* are returned to the
// caller, who knows which ones it can handle (NOSCRIPT, MOVED, ...).
// Owner: one pool slot or one subscriber. Thread safety: not thread-safe (a redisContext is not).
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ForkSockets.h"
#include "Reply.h"
#include "dlock/common/RedisOptions.h"

namespace dlock::detail {

using Argv = std::vector<std::string_view>;

class Connection {
 public:
  // Connects and authenticates. ConnectionError when unreachable within connectTimeout;
  // BackendError when AUTH or SELECT is refused.
  explicit Connection(const ConnectionOptions& options);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Sends one command and waits for its reply (at most commandTimeout).
  ReplyPtr command(const Argv& argv);

  // Pipelining: queue commands, then read their replies in order. Nothing is written until
  // the first readReply().
  void append(const Argv& argv);
  ReplyPtr readReply();

  // Changes the reply timeout (the subscriber waits longer than a command does).
  void setReadTimeout(std::chrono::milliseconds timeout);

  [[nodiscard]] bool broken() const noexcept { return broken_; }
  // True when the failure that broke it was a reply timeout.
  [[nodiscard]] bool timedOut() const noexcept { return timedOut_; }
  [[nodiscard]] const std::string& address() const noexcept { return address_; }

  // Non-blocking use by the subscriber: the socket, and the buffered-I/O steps of
  // redisGetReply taken apart. Each throws ConnectionError (and breaks the connection) on failure.
  [[nodiscard]] int fd() const noexcept { return context_->fd; }
  void flushWrites();                  // writes everything appended so far
  void readAvailable();                // reads what the socket has (call when poll says readable)
  ReplyPtr takeBufferedReply();        // a complete reply already read, or nullptr

 private:
  [[noreturn]] void fail(const std::string& what);

  struct ContextDeleter {
    void operator()(redisContext* context) const noexcept { redisFree(context); }
  };
  std::unique_ptr<redisContext, ContextDeleter> context_;
  ForkSocket forkSocket_;  // after context_: forgotten before the context is freed
  std::string address_;
  bool broken_ = false;
  bool timedOut_ = false;
};

}  // namespace dlock::detail
