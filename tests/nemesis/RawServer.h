// SPDX-License-Identifier: Apache-2.0
// RawServer.h — a plain hiredis connection to one lock server (through the client's own proxy),
// for the broken variants that break the server's side of the lock (BrokenOperator.h): they
// delete or take a key the way a wrong script would, outside dlock's code. Every failure is
// `nothing` and drops the connection (the variant then behaves as the library does).
// Owner: one BrokenOperator. Thread safety: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct redisContext;

namespace dlock::nemesis {

class RawServer {
 public:
  // `uri`: redis://host:port[?...]; std::invalid_argument for any other form.
  explicit RawServer(const std::string& uri);
  RawServer(const RawServer&) = delete;
  RawServer& operator=(const RawServer&) = delete;
  ~RawServer();

  // The lock key's PTTL in ms (negative when it has none), or nothing.
  std::optional<long long> pttl(const std::string& key);
  // DEL of the lock key whoever holds it; false when it could not be sent.
  bool remove(const std::string& key);
  // PERSIST of the lock key (its TTL removed); false when it could not be sent.
  bool persist(const std::string& key);
  // EVAL of a test-only script (BrokenShared.h) whose reply is an integer or a string: as text.
  std::optional<std::string> evalText(const std::string& source, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args);
  // Sets the lock key for `token` for `ttlMs` whoever holds it, with a fencing token raised as
  // the acquire script raises it; that token, or nothing.
  std::optional<std::uint64_t> take(const std::string& key, const std::string& token, long long ttlMs);
  // EVAL of `script` (a broken variant's, tests/*/broken/) with `keys` and `args`: its integer
  // reply, or nothing.
  std::optional<long long> eval(const char* script, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args);

 private:
  // One command's integer or string reply as text, or nothing.
  std::optional<std::string> command(const std::vector<std::string>& args);

  std::string host_;
  int port_ = 0;
  std::mutex mutex_;
  redisContext* context_ = nullptr;  // guarded by mutex_
};

}  // namespace dlock::nemesis
