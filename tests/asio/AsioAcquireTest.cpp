// SPDX-License-Identifier: Apache-2.0
// dlock/asio.h: async_acquire with callbacks on a strand, use_awaitable, deferred, and Asio's
// per-operation cancellation, on the memory backend.
#include <doctest/doctest.h>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <memory>
#include <optional>
#include <variant>

#include "ExceptionPtrTsan.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/asio.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/memory/MemoryOperator.h"

using namespace std::chrono_literals;
using dlock::AcquireOptions;
using dlock::Lease;
using dlock::test::eventually;

namespace {

std::shared_ptr<dlock::ILock> memoryLock(const std::shared_ptr<dlock::MemoryOperator>& backend) {
  return dlock::LockBuilder().backend(backend).build();
}

AcquireOptions once() {
  AcquireOptions options;
  options.waitTime = 0ms;
  return options;
}

bool isAborted(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& aborted) {
    return aborted.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}

bool isInterrupted(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const dlock::InterruptedError&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

TEST_SUITE("AsioAcquire") {
  TEST_CASE("a callback bound to a strand completes on that strand, the io_context's work tracked until then") {
    asio::io_context io;
    auto strand = asio::make_strand(io);
    auto lock = memoryLock(std::make_shared<dlock::MemoryOperator>());
    int calls = 0;
    bool onStrand = false;
    Lease got;
    dlock::asio::async_acquire(*lock, "job", {},
                               asio::bind_executor(strand, [&](std::exception_ptr error, Lease lease) {
                                 ++calls;
                                 onStrand = strand.running_in_this_thread();
                                 CHECK_FALSE(error);
                                 got = std::move(lease);
                               }));
    io.run();  // returns only once the handler ran: nothing else keeps it running
    CHECK(calls == 1);
    CHECK(onStrand);
    CHECK(got.isHeld());
  }

  TEST_CASE("use_awaitable: a coroutine waiting for a key gets it when the holder releases") {
    asio::io_context io;
    auto lock = memoryLock(std::make_shared<dlock::MemoryOperator>());
    std::optional<std::uint64_t> firstToken;
    std::optional<std::uint64_t> secondToken;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          Lease first = co_await dlock::asio::async_acquire(*lock, "job", {}, asio::use_awaitable);
          firstToken = first.fencingToken();
          asio::co_spawn(
              io,
              [&]() -> asio::awaitable<void> {
                Lease second = co_await dlock::asio::async_acquire(*lock, "job", {}, asio::use_awaitable);
                secondToken = second.fencingToken();
              },
              asio::detached);
          co_await asio::post(io, asio::use_awaitable);  // the second coroutine has asked by now
          first.release();
        },
        asio::detached);
    io.run();
    REQUIRE(firstToken);
    REQUIRE(secondToken);
    CHECK(*secondToken > *firstToken);
  }

  TEST_CASE("deferred: nothing is tried until the deferred operation is started") {
    asio::io_context io;
    auto lock = memoryLock(std::make_shared<dlock::MemoryOperator>());
    auto operation = dlock::asio::async_acquire(*lock, "job", {}, asio::experimental::deferred);
    CHECK(lock->acquire("job", once()));  // free: the deferred acquire has not run
    Lease got;
    std::move(operation)(asio::bind_executor(io, [&](std::exception_ptr error, Lease lease) {
      CHECK_FALSE(error);
      got = std::move(lease);
    }));
    io.run();
    CHECK(got.isHeld());
  }

  TEST_CASE("a cancellation emitted on the strand (by a steady_timer, as cancel_after would) ends a pending acquire with operation_aborted") {
    asio::io_context io;
    auto strand = asio::make_strand(io);
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    Lease held = holder->acquire("job");
    asio::cancellation_signal signal;
    std::exception_ptr failed;
    Lease got;
    dlock::asio::async_acquire(
        *lock, "job", {},
        asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(strand, [&](std::exception_ptr error, Lease lease) {
                                       failed = std::move(error);
                                       got = std::move(lease);
                                     })));
    // Asio 1.22 (Debian 12) has no cancel_after: a timer on the strand emits the total cancel.
    asio::steady_timer timer(strand, 10ms);
    timer.async_wait([&](std::error_code) { signal.emit(asio::cancellation_type::total); });
    io.run();
    CHECK(isAborted(failed));
    CHECK_FALSE(isInterrupted(failed));
    CHECK_FALSE(got);
    held.release();
    CHECK(lock->acquire("job", once()));  // the cancelled acquire left nothing
  }

  TEST_CASE("options.cancel before the slot's names the error: InterruptedError, and a later slot cancel changes nothing") {
    asio::io_context io;
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    Lease held = holder->acquire("job");
    asio::cancellation_signal signal;
    dlock::CancelSource cancel;
    AcquireOptions options;
    options.cancel = cancel.token();
    std::exception_ptr failed;
    dlock::asio::async_acquire(*lock, "job", options,
                               asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr error, Lease) {
                                                              failed = std::move(error);
                                                            })));
    cancel.requestCancel();
    signal.emit(asio::cancellation_type::total);
    io.run();
    CHECK(isInterrupted(failed));
    CHECK_FALSE(isAborted(failed));
  }

  TEST_CASE("a slot's cancel as the key is granted: the Lease delivered, or operation_aborted with the key given back") {
    asio::io_context io;
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = memoryLock(backend);
    asio::cancellation_signal signal;
    std::exception_ptr failed;
    Lease got;
    int completions = 0;
    dlock::asio::async_acquire(*lock, "job", {},
                               asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr error, Lease lease) {
                                                              ++completions;
                                                              failed = std::move(error);
                                                              got = std::move(lease);
                                                            })));
    // The free key is taken on dlock's threads; the cancel comes before the handler could run
    // (nothing runs the loop yet): the operation is done, or its grant is released first.
    REQUIRE(eventually([&] { return !backend->holderOf("job").empty(); }));
    signal.emit(asio::cancellation_type::total);
    io.run();
    CHECK(completions == 1);
    if (failed) {
      CHECK(isAborted(failed));
      CHECK_FALSE(got);
      CHECK(lock->acquire("job", once()));  // given back before the completion
    } else {
      CHECK(got.isHeld());
    }
  }

  TEST_CASE("use_awaitable under a race with a timer: the losing acquire is cancelled and leaves no hold") {
    using namespace asio::experimental::awaitable_operators;
    asio::io_context io;
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    Lease held = holder->acquire("job");
    std::optional<std::size_t> winner;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          asio::steady_timer timer(io, 20ms);
          auto result = co_await (dlock::asio::async_acquire(*lock, "job", {}, asio::use_awaitable) ||
                                  timer.async_wait(asio::use_awaitable));
          winner = result.index();
        },
        asio::detached);
    io.run();  // returns once the cancelled acquire completed too: its work was tracked
    REQUIRE(winner);
    CHECK(*winner == 1);  // the key stayed held: only the timer could end the race
    held.release();
    CHECK(lock->acquire("job", once()));
  }

  TEST_CASE("options.cancel still cancels an acquire started through Asio") {
    asio::io_context io;
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    Lease held = holder->acquire("job");
    dlock::CancelSource cancel;
    AcquireOptions options;
    options.cancel = cancel.token();
    std::exception_ptr failed;
    dlock::asio::async_acquire(*lock, "job", options,
                               asio::bind_executor(io, [&](std::exception_ptr error, Lease) { failed = error; }));
    cancel.requestCancel();
    io.run();
    CHECK(isInterrupted(failed));
  }
}
