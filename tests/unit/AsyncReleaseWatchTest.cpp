// SPDX-License-Identifier: Apache-2.0
// The async acquirer's release watches (core/src/async/AsyncAcquirer.h): a watch that tells of a
// release (IReleaseWatch::notifyOnRelease) wakes its pending acquire without being polled; one
// that cannot tell is polled every slice. Run with a backstop of an hour, so only the watch can
// wake a pending acquire.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "Eventually.h"
#include "Fixtures.h"
#include "core/src/async/AsyncAcquirer.h"
#include "dlock/async.h"

using namespace std::chrono_literals;
using dlock::test::eventually;

namespace {

// Counts its polls; forwards notifyOnRelease only when `tells`.
class CountedWatch final : public dlock::IReleaseWatch {
 public:
  CountedWatch(std::unique_ptr<dlock::IReleaseWatch> inner, bool tells, std::atomic<int>& polls)
      : inner_(std::move(inner)), tells_(tells), polls_(polls) {}
  bool waitForRelease(std::chrono::milliseconds timeout) override {
    polls_.fetch_add(1);
    return inner_->waitForRelease(timeout);
  }
  bool notifyOnRelease(std::function<void()> heard) override {
    return tells_ && inner_->notifyOnRelease(std::move(heard));
  }

 private:
  const std::unique_ptr<dlock::IReleaseWatch> inner_;
  const bool tells_;
  std::atomic<int>& polls_;
};

class CountingOperator final : public dlock::test::ForwardingOperator {
 public:
  CountingOperator(std::shared_ptr<dlock::MemoryOperator> inner, bool tells)
      : ForwardingOperator(std::move(inner)), tells_(tells) {}
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override {
    auto watch = std::make_unique<CountedWatch>(inner_->watch(key), tells_, polls_);
    made_.fetch_add(1);
    return watch;
  }
  [[nodiscard]] int polls() const { return polls_.load(); }
  [[nodiscard]] int made() const { return made_.load(); }

 private:
  const bool tells_;
  std::atomic<int> polls_{0};
  std::atomic<int> made_{0};
};


struct PendingAcquire {
  std::shared_ptr<CountingOperator> backend;
  std::shared_ptr<dlock::ILock> lock;
  dlock::Lease holder;
  std::unique_ptr<dlock::detail::AsyncAcquirer> async;
  std::promise<dlock::Lease> got;

  explicit PendingAcquire(bool tells)
      : backend(std::make_shared<CountingOperator>(std::make_shared<dlock::MemoryOperator>(), tells)),
        lock(dlock::LockBuilder().backend(backend).build()),
        holder(lock->acquire("job")) {
    dlock::detail::AsyncAcquirer::Options options;
    options.workers = 1;
    options.backstop = std::chrono::hours(1);
    async = std::make_unique<dlock::detail::AsyncAcquirer>(*lock, backend, options);
    async->start("job", dlock::detail::AsyncAcquirer::Deadline::max(), std::nullopt, dlock::CancelToken(),
                 [this](dlock::Lease lease, const std::exception_ptr& error) {
                   if (error) {
                     got.set_exception(error);
                   } else {
                     got.set_value(std::move(lease));
                   }
                 });
  }
  ~PendingAcquire() { async->close(); }
};

}  // namespace

TEST_SUITE("AsyncReleaseWatch") {
  TEST_CASE("a pending acquire whose watch tells is not polled while nothing is released, and is woken by the release") {
    PendingAcquire pending(true);
    std::future<dlock::Lease> future = pending.got.get_future();
    REQUIRE(eventually([&] { return pending.backend->made() == 1; }));
    const int before = pending.backend->polls();
    std::this_thread::sleep_for(100ms);  // a watch polled every 2 ms would be polled ~50 times
    CHECK(pending.backend->polls() - before <= 1);
    pending.holder.release();
    REQUIRE(future.wait_for(30s) == std::future_status::ready);  // the backstop is an hour away
    dlock::Lease lease = future.get();
    CHECK(lease.isHeld());
  }

  TEST_CASE("a pending acquire whose watch cannot tell is polled every slice, and is woken by the release") {
    PendingAcquire pending(false);
    std::future<dlock::Lease> future = pending.got.get_future();
    REQUIRE(eventually([&] { return pending.backend->made() == 1; }));
    const int before = pending.backend->polls();
    CHECK(eventually([&] { return pending.backend->polls() >= before + 5; }));
    pending.holder.release();
    REQUIRE(future.wait_for(30s) == std::future_status::ready);
    dlock::Lease lease = future.get();
    CHECK(lease.isHeld());
  }
}
