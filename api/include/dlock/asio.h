// SPDX-License-Identifier: Apache-2.0
// asio.h — dlock::asio::async_acquire: ILock::acquireAsync (dlock/async.h) as an Asio asynchronous
// operation, for applications that have (standalone) Asio; header-only, nothing in the dlock
// library depends on Asio.
//
//   dlock::Lease lease = co_await dlock::asio::async_acquire(*lock, "job", options, asio::use_awaitable);
//   dlock::asio::async_acquire(*lock, "job", options,
//       asio::bind_executor(strand, [](std::exception_ptr error, dlock::Lease lease) { ... }));
//
// The completion signature is void(std::exception_ptr, dlock::Lease), so any completion token
// works (callbacks, use_awaitable, deferred, use_future): the error is what acquireAsync
// completes with (InterruptedError, ConnectionError, ...) or, after a slot's cancel,
// operation_aborted; the Lease empty when options.waitTime ran out. The handler runs on its associated executor (the system executor when it has none),
// whose work is tracked until then. Asio's per-operation cancellation (a bound cancellation slot:
// terminal, partial or total; dlock gives the strongest, total: nothing is left behind) ends it as
// Asio's own operations end: a std::system_error with asio::error::operation_aborted, a key
// granted as the cancel came released first. options.cancel ends it with InterruptedError, as it
// ends acquireAsync; whichever cancel came first names the error. A Lease that was granted before
// either cancel is delivered (a cancel is a request, as in Asio).
// Owner: the operation owns its handler until it runs. Thread safety: as acquireAsync; emit a
// slot's cancellation on the handler's executor, as Asio's own operations require.
#pragma once

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "dlock/Cancel.h"
#include "dlock/Validation.h"
#include "dlock/ILock.h"
#include "dlock/LockError.h"
#include "dlock/async.h"

namespace dlock::asio {
namespace detail {

// One operation: the handler, its executor's tracked work, and the cancel the slot and the
// caller's options.cancel both reach.
template <class Handler>
class AcquireOperation {
 public:
  explicit AcquireOperation(Handler handler)
      : handler_(std::move(handler)),
        work_(::asio::prefer(::asio::get_associated_executor(handler_),
                             ::asio::execution::outstanding_work.tracked)),
        slot_(::asio::get_associated_cancellation_slot(handler_)) {}

  // The token acquireAsync takes: cancelled by the slot and by `callerCancel`.
  CancelToken connect(const CancelToken& callerCancel) {
    if (callerCancel.cancellable()) {
      chained_ = std::make_unique<CancelCallback>(callerCancel, [source = cancel_, by = cancelledBy_]() mutable {
        Origin none = Origin::None;
        (void)by->compare_exchange_strong(none, Origin::Caller);
        source.requestCancel();
      });
    }
    if (slot_.is_connected()) {
      slot_.assign([source = cancel_, by = cancelledBy_](::asio::cancellation_type type) mutable {
        if (type == ::asio::cancellation_type::none) return;
        Origin none = Origin::None;
        (void)by->compare_exchange_strong(none, Origin::Slot);
        source.requestCancel();
      });
    }
    return cancel_.token();
  }

  // From dlock's completion thread: runs the handler on its executor.
  static void complete(std::shared_ptr<AcquireOperation> self, Lease lease, std::exception_ptr error) {
    auto work = self->work_;
    ::asio::post(work, [self = std::move(self), lease = std::move(lease), error = std::move(error)]() mutable {
      if (self->slot_.is_connected()) self->slot_.clear();
      Handler handler = std::move(self->handler_);
      if (error && *self->cancelledBy_ == Origin::Slot && isInterrupted(error)) {
        error = std::make_exception_ptr(std::system_error(::asio::error::operation_aborted, "dlock: async_acquire"));
      }
      self.reset();  // the operation ends before its handler runs, as Asio's own do
      std::move(handler)(std::move(error), std::move(lease));
    });
  }

 private:
  enum class Origin : unsigned char { None, Slot, Caller };  // which cancel came first

  static bool isInterrupted(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const InterruptedError&) {
      return true;
    } catch (...) {
      return false;
    }
  }

  using Work = std::decay_t<decltype(::asio::prefer(std::declval<::asio::associated_executor_t<Handler>>(),
                                                    ::asio::execution::outstanding_work.tracked))>;

  Handler handler_;
  Work work_;
  ::asio::associated_cancellation_slot_t<Handler> slot_;
  CancelSource cancel_;
  std::unique_ptr<CancelCallback> chained_;  // the caller's options.cancel, passed on
  std::shared_ptr<std::atomic<Origin>> cancelledBy_ = std::make_shared<std::atomic<Origin>>(Origin::None);
};

struct AcquireInitiation {
  template <class Handler>
  void operator()(Handler&& handler, ILock* lock, std::string key, AcquireOptions options) const {
    auto operation = std::make_shared<AcquireOperation<std::decay_t<Handler>>>(std::forward<Handler>(handler));
    options.cancel = operation->connect(options.cancel);
    lock->acquireAsync(key, options, [operation](Lease lease, std::exception_ptr error) mutable {
      AcquireOperation<std::decay_t<Handler>>::complete(std::move(operation), std::move(lease), std::move(error));
    });
  }
};

}  // namespace detail

// Starts lock.acquireAsync(key, options) as an Asio operation completing with
// void(std::exception_ptr, dlock::Lease). Bad arguments (an empty key, a bad lease time) throw
// InvalidArgumentError from this call, before anything starts.
template <class CompletionToken>
auto async_acquire(ILock& lock, std::string_view key, AcquireOptions options, CompletionToken&& token) {
  ::dlock::detail::checkKey(key, "async_acquire");
  if (options.leaseTime) ::dlock::detail::checkLeaseTime(*options.leaseTime, "the lease time", "async_acquire");
  return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, Lease)>(
      detail::AcquireInitiation{}, token, &lock, std::string(key), std::move(options));
}

}  // namespace dlock::asio
