// SingleOperator.h — the IOperator for one Redis server, through hiredis.
//
// Acquire is one Lua script (when the key is free: INCR of the fencing counter, then SET PX),
// release a compare-and-delete script that also PUBLISHes on the key's channel, extend a
// compare-and-PEXPIRE script (batched in one pipeline per connection for the watchdog). Scripts
// go by EVALSHA, reloaded on NOSCRIPT. Connections come from a small pool; a broken one is
// reconnected with back-off.
// Redis keys: `<prefix>{<key>}` holds the token, `<prefix>{<key>}:fence` the fencing counter,
// and `<prefix>{<key>}:released` is the release channel.
// After fork(), a child's first call opens the child's own connections and subscriber; the
// parent's are never used or closed there.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <memory>
#include <string>

#include "dlock/IOperator.h"
#include "dlock/common/RedisOptions.h"

namespace dlock {

struct SingleOptions {
  ConnectionOptions connection;
  PoolOptions pool;
  std::string keyPrefix = kDefaultKeyPrefix;
};

class SingleOperator final : public IOperator {
 public:
  // Connects lazily: construction never blocks; the first call opens the first connection.
  explicit SingleOperator(SingleOptions options);
  ~SingleOperator() override;

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override;
  LeaseInfo inspect(std::string_view key) override;
  [[nodiscard]] std::string describe() const override;

  // Connections re-opened after a failure, since construction.
  [[nodiscard]] std::uint64_t reconnects() const noexcept;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock
