// SPDX-License-Identifier: Apache-2.0
// async.h — asynchronous acquisition: ILock::acquireAsync (a std::future<Lease>, or a callback),
// and AsyncCallback. C++17, no dependency beyond the standard library.
//
//   auto f = lock->acquireAsync("job", options);          f.get(): the Lease, empty on timeout
//   lock->acquireAsync("job", options, [](dlock::Lease lease, std::exception_ptr error) { ... });
//
// options are acquire()'s: waitTime (unset: as long as it takes; <= 0: one try), leaseTime, and
// cancel. A pending acquire holds no thread: it waits on the backend's release messages (a fair
// lock's or a read-write lock side's: its own place in the queue and its hand-off message) and one
// timer of the lock; its tries run on a small fixed pool of the lock's (started with the first
// acquireAsync). Every operation completes exactly once, on the lock's completion thread: a Lease
// (empty when waitTime ran out, as acquire() returns), or an error — InterruptedError on a cancel
// or when the lock is closed or destroyed, otherwise what acquire() throws. A key granted as the
// cancel came is released before the operation completes with InterruptedError. A forked child
// has no pending operation of its parent's. A callback must not block for long (it delays the
// completions behind it) nor destroy or close the lock it came from.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/ILock.h"

namespace dlock {
namespace detail {

// The lock's side of acquireAsync; implemented in core/ (the dlock_core layer).
class AsyncAcquisition {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  AsyncAcquisition() = default;
  AsyncAcquisition(const AsyncAcquisition&) = delete;
  AsyncAcquisition& operator=(const AsyncAcquisition&) = delete;
  virtual ~AsyncAcquisition() = default;

  // Starts one acquire of the validated `key` (deadline as ILock's hooks take it); `done` runs
  // exactly once, on the completion thread.
  virtual void start(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                     const CancelToken& cancel, AsyncCallback done) = 0;
};

}  // namespace detail

inline std::future<Lease> ILock::acquireAsync(std::string_view key, const AcquireOptions& options) {
  auto promise = std::make_shared<std::promise<Lease>>();
  std::future<Lease> future = promise->get_future();
  acquireAsync(key, options, [promise](Lease lease, std::exception_ptr error) {
    if (error) {
      promise->set_exception(std::move(error));
    } else {
      promise->set_value(std::move(lease));
    }
  });
  return future;
}

inline void ILock::acquireAsync(std::string_view key, const AcquireOptions& options, AsyncCallback callback) {
  detail::checkKey(key, "acquireAsync");
  if (options.leaseTime) detail::checkLeaseTime(*options.leaseTime, "the lease time", "acquireAsync");
  if (!callback) throw InvalidArgumentError("dlock: acquireAsync of " + std::string(key) + ": no callback");
  detail::AsyncAcquisition& async = doAsyncAcquisition();
  async.start(key, options.waitTime ? deadlineAfter(*options.waitTime) : kNoDeadline, options.leaseTime,
              options.cancel, std::move(callback));
}

}  // namespace dlock
