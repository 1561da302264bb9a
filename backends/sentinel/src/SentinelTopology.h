// SPDX-License-Identifier: Apache-2.0
// SentinelTopology.h — a Sentinel-watched master as RedisOperator's topology: every key on the
// master the sentinels name, confirmed with ROLE; found again after a connection failure or a
// "not now" reply (READONLY, MASTERDOWN, LOADING...), and followed through failovers announced on
// the sentinels' channels (SentinelEvents): calls for a master being failed over wait for the
// promotion (at most the command timeout), and move as soon as the replica answers ROLE master.
// A call that failed before its command can have run is retried once when the master moved.
// A master left behind loses its release subscriber, which wakes its waiters to follow.
// Owner: a SentinelOperator, per process. Thread safety: thread-safe. The destructor stops and
// joins the sentinel subscriptions and the promotion thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "MasterResolver.h"
#include "SentinelEvents.h"
#include "redis/src/Topology.h"
#include "dlock/sentinel/SentinelOperator.h"

namespace dlock::detail {

class SentinelTopology final : public Topology {
 public:
  // ConfigError naming the problem when the options are not usable.
  explicit SentinelTopology(SentinelOptions options);
  ~SentinelTopology() override;

  Route route(std::uint16_t slot) override;
  Verdict afterReply(const Route& route, std::string_view error) override;
  Verdict afterFailure(const Route& route, Failure failure) override;
  void awaitChange(std::uint64_t version, std::chrono::milliseconds pause) override;
  [[nodiscard]] bool retryable(std::string_view error) const override;
  std::vector<RedisNode*> owners(const std::vector<std::uint16_t>& slots) override;
  [[nodiscard]] bool serves(const RedisNode* node, std::uint16_t slot) const override;
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] std::vector<std::vector<std::string>> nodeCommands() const override { return {{"ROLE"}}; }
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::uint64_t reconnects() const override;

  // "host:port" of the master now; empty until one was found.
  [[nodiscard]] std::string masterAddress() const;
  [[nodiscard]] std::uint64_t switches() const noexcept { return switches_.load(std::memory_order_relaxed); }

 private:
  // A promotion the sentinels announced that has not moved us yet. Calls for `from` wait for it
  // until `until`; after that it is given up (calls go on, the sentinels are asked as usual) but
  // kept, so the same announcement repeated does not hold calls again.
  struct Failover {
    MasterAddress from;
    MasterAddress to;
    std::chrono::steady_clock::time_point until;
    bool gaveUp = false;
  };

  // Why the sentinels are asked.
  enum class Reason {
    Unknown,  // no master yet: unless another caller found one meanwhile
    Failure,  // a call failed on a master: unless it moved meanwhile or was asked just now
    Check,    // a sentinel subscription (re)started: unless asked just now
    Forced,   // whatever happened before
  };

  RedisNode* current();
  bool leavingLocked() const;
  RedisNode* resolve(Reason reason, const RedisNode* failed);
  RedisNode* install(const MasterAddress& to, const std::optional<MasterAddress>& from, const char* why);
  RedisNode* nodeAtLocked(const MasterAddress& address);
  void forgetDemoted(const MasterAddress& address);
  std::vector<MasterAddress> staleMasters();
  bool isMaster(const MasterAddress& node, std::unique_ptr<Connection>& probe);
  void watchPromotions();
  void onEvent(const SentinelEvent& event) noexcept;

  const SentinelOptions options_;
  MasterResolver resolver_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // master_, failover_ or stopping_ changed
  std::map<std::string, std::unique_ptr<RedisNode>> nodes_;  // guarded by mutex_; every master so far, never erased
  RedisNode* master_ = nullptr;                              // guarded by mutex_
  MasterAddress masterAddress_;                              // guarded by mutex_; master_'s
  std::uint64_t version_ = 0;                                // guarded by mutex_; moves so far
  std::optional<Failover> failover_;                         // guarded by mutex_
  std::vector<std::pair<MasterAddress, std::chrono::steady_clock::time_point>> demoted_;  // guarded by mutex_
  std::optional<std::chrono::steady_clock::time_point> resolvedAt_;  // guarded by mutex_
  std::exception_ptr lastError_;                                     // guarded by mutex_
  bool stopping_ = false;                                            // guarded by mutex_
  std::mutex resolveMutex_;  // one resolution or move at a time; taken before mutex_
  std::atomic<std::uint64_t> switches_{0};

  // Last: their threads use the members above (see the destructor).
  std::thread promotions_;  // watchPromotions()
  SentinelEvents events_;   // failover events, from every sentinel
};

}  // namespace dlock::detail
