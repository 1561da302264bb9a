// SPDX-License-Identifier: Apache-2.0
// A child may be forked at any instant: while the parent's threads log, renew, acquire and wait.
// Each child uses the inherited lock at once and must never block on a lock a parent thread held
// at the fork (dlock's own, or the logger's registry and sinks).
#include <doctest/doctest.h>

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include "ForkedChild.h"
#include "RedisProcess.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::ForkedChild;
using dlock::test::RedisProcess;

namespace {

constexpr int kHeldKeys = 48;
// A child does one short lock cycle on its own connections; anything near this has hung.
constexpr auto kChildBudget = 20s;

// The `dlock` logger at debug level into a sink with a real mutex, for the duration of a test:
// every renewal and acquisition of the parent's threads then goes through the sink.
class BusyLogger {
 public:
  BusyLogger() {
    logger_ = spdlog::get("dlock");
    if (!logger_) logger_ = spdlog::basic_logger_mt("dlock", "/dev/null");
    sinks_ = logger_->sinks();
    level_ = logger_->level();
    logger_->sinks() = {std::make_shared<spdlog::sinks::basic_file_sink_mt>("/dev/null")};
    logger_->set_level(spdlog::level::debug);
  }
  BusyLogger(const BusyLogger&) = delete;
  BusyLogger& operator=(const BusyLogger&) = delete;
  ~BusyLogger() {
    logger_->set_level(level_);
    logger_->sinks() = sinks_;
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<spdlog::sink_ptr> sinks_;
  spdlog::level::level_enum level_ = spdlog::level::warn;
};

// Parent threads that keep the lock busy: one holds kHeldKeys keys renewed every 10 ms, two
// contend for one key (acquiring, waiting on release messages, releasing).
class BusyParent {
 public:
  explicit BusyParent(std::shared_ptr<dlock::ILock> lock) : lock_(std::move(lock)) {
    holder_ = std::thread([this] { hold(); });
    {
      std::unique_lock<std::mutex> guard(mutex_);
      holding_.wait_for(guard, kChildBudget, [this] { return held_; });
    }
    for (int i = 0; i < 2; ++i) contenders_.emplace_back([this] { contend(); });
  }
  BusyParent(const BusyParent&) = delete;
  BusyParent& operator=(const BusyParent&) = delete;
  ~BusyParent() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      stop_ = true;
    }
    holding_.notify_all();
    holder_.join();
    for (auto& contender : contenders_) contender.join();
  }

  [[nodiscard]] bool held() {
    std::lock_guard<std::mutex> guard(mutex_);
    return held_;
  }
  [[nodiscard]] int errors() const { return errors_; }
  [[nodiscard]] int unanswered() const { return unanswered_; }

 private:
  void hold() {
    try {
      for (int i = 0; i < kHeldKeys; ++i) {
        if (!lock_->tryLock("held-" + std::to_string(i), 5s)) ++errors_;
      }
    } catch (const dlock::LockError&) {
      ++errors_;
    }
    std::unique_lock<std::mutex> guard(mutex_);
    held_ = true;
    holding_.notify_all();
    holding_.wait(guard, [this] { return stop_; });
    guard.unlock();
    for (int i = 0; i < kHeldKeys; ++i) (void)lock_->unlockQuietly("held-" + std::to_string(i));
  }

  void contend() {
    while (true) {
      {
        std::lock_guard<std::mutex> guard(mutex_);
        if (stop_) return;
      }
      try {
        if (lock_->tryLock("contended", 50ms)) lock_->unlock("contended");
      } catch (const dlock::LockLostError&) {
        // A short lease on a loaded machine may run out: not what this test is about.
      } catch (const dlock::ConnectionError&) {
        // Neither is a 50 ms wait whose quorum did not answer in time on a loaded machine (a
        // Redlock node's timeout): counted apart, and shown.
        ++unanswered_;
      } catch (const dlock::LockError&) {
        ++errors_;
      }
    }
  }

  const std::shared_ptr<dlock::ILock> lock_;
  std::mutex mutex_;
  std::condition_variable holding_;
  bool held_ = false;  // guarded by mutex_
  bool stop_ = false;  // guarded by mutex_
  std::atomic<int> errors_{0};
  std::atomic<int> unanswered_{0};
  std::thread holder_;
  std::vector<std::thread> contenders_;
};

struct ForkOutcome {
  int done = 0;
  int hung = 0;
  int failed = 0;
};

// Forks `forks` children of a busy parent; each takes and releases a key of its own through the
// inherited lock and exits.
ForkOutcome forkBusyParent(const std::shared_ptr<dlock::ILock>& lock, int forks) {
  BusyLogger logger;
  BusyParent parent(lock);
  REQUIRE(parent.held());
  ForkOutcome outcome;
  for (int i = 0; i < forks; ++i) {
    const std::string key = "child-" + std::to_string(i);
    ForkedChild child([&] {
      if (!lock->tryLock(key, 5s)) return 2;
      try {
        lock->unlock(key);
      } catch (const dlock::LockLostError&) {
        return 0;  // a short lease on a loaded machine may run out: the child did not hang
      }
      return 0;
    });
    const int status = child.exitStatus(kChildBudget);
    if (status == 0) {
      ++outcome.done;
    } else if (status == ForkedChild::kHung) {
      ++outcome.hung;
    } else {
      ++outcome.failed;
    }
  }
  CHECK(parent.errors() == 0);
  MESSAGE("the parent's contenders: " << parent.unanswered() << " waits ended with no answer in time");
  return outcome;
}

std::shared_ptr<dlock::ILock> busyLock(std::shared_ptr<dlock::IOperator> backend) {
  return dlock::LockBuilder().backend(std::move(backend)).watchdogLease(30ms).build();  // renewed every 10 ms
}

}  // namespace

TEST_SUITE("Fork") {
  TEST_CASE("5,000 children forked from a busy parent on single, memory and Redlock backends: none hangs") {
    SUBCASE("single Redis server: 2,000 forks") {
      RedisProcess server;
      const ForkOutcome outcome = forkBusyParent(busyLock(dlock::connect(server.uri())), 2000);
      CHECK(outcome.hung == 0);
      CHECK(outcome.failed == 0);
      CHECK(outcome.done == 2000);
    }
    SUBCASE("memory backend: 1,500 forks") {
      const ForkOutcome outcome = forkBusyParent(busyLock(std::make_shared<dlock::MemoryOperator>()), 1500);
      CHECK(outcome.hung == 0);
      CHECK(outcome.failed == 0);
      CHECK(outcome.done == 1500);
    }
    SUBCASE("Redlock over three servers: 1,500 forks") {
      RedisProcess a;
      RedisProcess b;
      RedisProcess c;
      auto redlock = std::make_shared<dlock::RedlockOperator>(std::vector<std::shared_ptr<dlock::IOperator>>{
          dlock::connect(a.uri()), dlock::connect(b.uri()), dlock::connect(c.uri())});
      const ForkOutcome outcome = forkBusyParent(busyLock(redlock), 1500);
      CHECK(outcome.hung == 0);
      CHECK(outcome.failed == 0);
      CHECK(outcome.done == 1500);
    }
  }
}

#endif  // DLOCK_TEST_FORK_WITH_THREADS
