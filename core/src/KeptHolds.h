// SPDX-License-Identifier: Apache-2.0
// KeptHolds.h — what close() needs of a lock core (LockCore, ReadWriteCore): the close token
// every wait of the lock listens to, and the thread holds close() releases. Closing cancels the
// token (every wait ends with InterruptedError, a later one is refused before it sends), then
// releases each kept hold through the core's `unlock`, logged by key as "released at close".
// A forked child skips its parent's holds. Owner: one lock core. Thread safety: thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "LeaseState.h"
#include "LockCounters.h"
#include "dlock/Cancel.h"
#include "dlock/IOperator.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

class KeptHolds {
 public:
  // Releases `lease` on the server (the core's own release call for its kind).
  using Unlock = std::function<ReleaseResult(const LeaseState& lease)>;

  // `backend` names the server in messages, `lockName` the lock; `counters` counts leases found
  // lost at close.
  KeptHolds(std::shared_ptr<IOperator> backend, std::shared_ptr<LockCounters> counters, Unlock unlock,
            const std::string& lockName);
  KeptHolds(const KeptHolds&) = delete;
  KeptHolds& operator=(const KeptHolds&) = delete;
  ~KeptHolds() = default;

  // Keeps a thread hold for close(): InterruptedError (released first) when the lock was closed
  // as it was acquired. forget() when the hold ends.
  void keep(const std::shared_ptr<LeaseState>& lease);
  void forget(const LeaseState& lease) noexcept;
  // Cancels token(), then releases every kept hold (each within the backend's command timeout).
  void close() noexcept;

  [[nodiscard]] bool closed() const noexcept { return closing_.cancelRequested(); }
  // Cancelled by close(); lives as long as this object (WaitPolicy holds it by reference).
  [[nodiscard]] const CancelToken& token() const noexcept { return closingToken_; }
  // InterruptedError: the lock was closed. `what`: "lock 'k'".
  [[noreturn]] void throwClosed(const std::string& what) const;

 private:
  void releaseAtClose(LeaseState& lease) noexcept;

  const std::shared_ptr<IOperator> backend_;
  const std::shared_ptr<LockCounters> counters_;
  const Unlock unlock_;
  const std::string lockName_;  // quoted, for logs
  const Log log_;

  CancelSource closing_;
  const CancelToken closingToken_;  // closing_'s, copied once rather than per acquire
  ForkSafeMutex mutex_;
  std::unordered_map<const LeaseState*, std::weak_ptr<LeaseState>> kept_;  // guarded by mutex_
};

}  // namespace dlock::detail
