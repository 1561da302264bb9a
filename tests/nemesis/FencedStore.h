// SPDX-License-Identifier: Apache-2.0
// FencedStore.h — the storage a lock protects, on its own fault-free redis-server: a fenced
// register (Kleppmann's "How to do distributed locking": a write carries the writer's fencing
// token and is refused when a higher one was accepted) and an unfenced counter per key.
//
// Store keys, all inside the key's hash tag:
//   nemesis:{k}:fence-last     the last accepted token
//   nemesis:{k}:fence-count    how many writes were accepted
//   nemesis:{k}:fence-tokens   every accepted token, in order (RPUSH)
//   nemesis:{k}:counter        the unfenced counter
//   nemesis:{k}:acts           the act log of read-write and semaphore holders: `enter OWNER N` and
//                              `exit OWNER N` (N permits; 1 for a reader or writer), in the
//                              store's order (RPUSH), written with the tally in one script
//   nemesis:{k}:tally          the permits inside their sections: INCRBY N at enter, DECRBY at exit
//   nemesis:{k}:buffer         the condition workload's bounded buffer (items, oldest first)
//   nemesis:{k}:put, :taken    every item a fenced put or take the store accepted, in its order
//   nemesis:{k}:peak           the buffer's longest length after an accepted put
//
// Connection: one hiredis context with a generous timeout, reconnected before the next command
// after any error. A command whose reply was lost is not resent: it may have run, and a second
// run would write twice. Owner: one client process. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct redisContext;

namespace dlock::nemesis {

// Anything the store could not do: unreachable, a lost reply, an error reply.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct StoreKeySnapshot {
  std::vector<std::uint64_t> acceptedTokens;
  long long acceptedCount = 0;
  std::uint64_t lastToken = 0;
  long long counter = 0;  // the unfenced counter's final value (0 when never set)
  std::vector<std::string> acts{};  // the act log, in the store's order
  std::vector<std::string> put{};     // the buffer's accepted puts and takes, in the store's order
  std::vector<std::string> taken{};
  std::vector<std::string> buffer{};  // the items left in it
  long long bufferPeak = 0;
};

class FencedStore {
 public:
  // "host:port"; connects lazily. StoreError for an address it cannot parse.
  explicit FencedStore(const std::string& address,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10));
  FencedStore(const FencedStore&) = delete;
  FencedStore& operator=(const FencedStore&) = delete;
  FencedStore(FencedStore&&) = delete;
  FencedStore& operator=(FencedStore&&) = delete;
  ~FencedStore();

  // True when `token` was accepted: not lower than the last accepted token of `key`.
  [[nodiscard]] bool write(const std::string& key, std::uint64_t token);

  // A leader's term, in the same register: true when `term` is above the last accepted one (an
  // equal one is refused: a term writes once).
  [[nodiscard]] bool writeTerm(const std::string& key, std::uint64_t term);

  // The unfenced counter: a plain GET and a plain SET, deliberately two commands.
  [[nodiscard]] long long get(const std::string& key);
  void set(const std::string& key, long long value);

  // Records that `owner` enters (or exits) its section of `key` with `permits`, and moves the
  // tally by them, in one script; the tally after it.
  long long act(const std::string& key, bool enter, const std::string& owner, std::uint32_t permits);
  // The fenced register's last accepted token of `key` (0 before any): what a reader reads.
  [[nodiscard]] std::uint64_t lastToken(const std::string& key);

  // The bounded buffer of `key` (a plain LLEN, a plain LINDEX 0: "" when empty), and its fenced
  // writes: a put appends `item`, a take removes it; each as write() decides by `token` and is
  // recorded in the fenced register with it (fence-last, -count, -tokens). True when accepted.
  [[nodiscard]] long long bufferLength(const std::string& key);
  [[nodiscard]] std::string bufferHead(const std::string& key);
  [[nodiscard]] bool bufferPut(const std::string& key, std::uint64_t token, const std::string& item);
  [[nodiscard]] bool bufferTake(const std::string& key, std::uint64_t token, const std::string& item);

  // The final state of each of `keys`, for the checker.
  [[nodiscard]] std::map<std::string, StoreKeySnapshot> snapshot(const std::vector<std::string>& keys);

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const noexcept;
  };
  struct Reply;

  Reply command(const std::vector<std::string>& argv);
  bool bufferWrite(const std::string& key, std::uint64_t token, const char* action, const std::string& item);
  redisContext& connection();

  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<redisContext, ContextDeleter> context_;  // null after an error: reconnect
};

}  // namespace dlock::nemesis
