// SPDX-License-Identifier: Apache-2.0
// HoldRenewal.h — what the fault tests' holders over the backend's operators share
// (OperatorHolder.cpp, ConditionHolder.cpp): a fresh owner token, their records (History.h ops,
// message = the owner token), and the renewal of one hold on its own thread every third of its
// lease, as the watchdog renews (HoldRenewal).
// Owner: one hold. Thread safety: start and stop from the hold's thread; the state it moves is atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <dlock/IOperator.h>

#include "History.h"

namespace dlock::nemesis {

[[nodiscard]] std::string newOwnerToken();

void recordHoldOp(const std::function<void(Op)>& sink, const char* name, const std::string& key, const std::string& owner,
                  std::string value, std::int64_t timeNs = 0, std::uint64_t token = 0);

// The hold a renewal keeps: how to renew it once, and the state the renewal moves.
struct RenewedHold {
  std::function<ExtendResult()> renew;
  std::function<void(Op)> sink;
  std::string key;
  std::string owner;
  std::uint64_t fence = 0;
  std::chrono::milliseconds lease{0};
  std::atomic<std::int64_t>* deadlineNs = nullptr;  // moved to send + validity at each renewal
  std::atomic<bool>* lost = nullptr;                // set when a renewal answered "not ours"
};

// Every third of the lease: `renew`; extended → the deadline moved and a `lease` record (send,
// validity); "not ours" → lost, a `lost` record, and no more renewals; a LockError or an unknown
// answer leaves the local deadline to decide.
class HoldRenewal {
 public:
  HoldRenewal() = default;
  HoldRenewal(const HoldRenewal&) = delete;
  HoldRenewal& operator=(const HoldRenewal&) = delete;
  ~HoldRenewal() { stop(); }

  void start(RenewedHold hold);
  void stop();

 private:
  void loop();

  RenewedHold hold_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace dlock::nemesis
