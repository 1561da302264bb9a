// SPDX-License-Identifier: Apache-2.0
// Client.h — dlock::Client: one object that hands out every primitive by name over one backend
// (Redisson's RedissonClient.getLock / getReadWriteLock / getSemaphore), and ClientOptions.
//
//   dlock::Client client("redis://127.0.0.1:6379");          // or Client(backend), memory in tests
//   std::shared_ptr<dlock::ILock> orders = client.getLock("orders");
//   auto config = client.getReadWriteLock("config");
//   auto partner = client.getSemaphore("partner-api", 3);
//   std::string text = dlock::formatMetrics(client);          // all of them, each family once
//
//   call                    returns                            same name again
//   getLock(name)           an ILock named `name`, whose       the same object
//   getFairLock(name)       default key is `name` (any key     the same object
//                           may be passed to its calls)
//   getReadWriteLock(name)  a ReadWriteLock, likewise          the same object
//   getSemaphore(name, n)   a Semaphore of capacity n          the same object (another n: ConfigError)
//   getCondition(lock, c)   the Condition `c` of the key       a copy of the same condition
//                           `lock` of getLock(lock)
//   getElection(name)       the Election `name` (terms of      the same object
//                           ElectionBuilder's 15 s lease)
//
// A name is one primitive's: asking for it as another kind is a ConfigError (their metrics would
// share a label). A name is a key (Validation.h): InvalidArgumentError when empty or too long.
// Every primitive takes the client's options (ClientOptions); for one that needs others (its own
// wait strategy, a fixed lease, another term lease) lockBuilder(), semaphoreBuilder() and
// electionBuilder() hand out builders preset with the client's backend, clock, watchdog and
// options, whose products the client does not track.
// close() closes everything handed out, as each class's close() does (waits end with
// InterruptedError, the thread holds a lock keeps are released; Leases and PermitLeases stay their
// holders'), and makes every later get... an InterruptedError. Dropping the last copy of a client
// closes nothing: what it handed out lives as long as its users hold it. The primitives share the
// backend (its connections and subscriber) and one watchdog (SharedWatchdog.h): one thread,
// started by the first renewed hold, renews the leases due at each tick of every primitive (an
// election's terms too) in one batch (one round trip per node on Redis), each by its own kind's script for its own lease, and
// reports each loss to its own primitive's handler, stats and log. A primitive closed alone stops
// only its own leases; the builders' products (lockBuilder(), semaphoreBuilder()) share the
// thread too unless given another clock. A forked child renews its own holds on a thread of its own.
// Owner: a value; copies share one state (cheap to copy, to inject). Thread safety: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/Clock.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/IWait.h"
#include "dlock/LockOptions.h"
#include "dlock/LockStats.h"
#include "dlock/core/Condition.h"
#include "dlock/core/Election.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/Semaphore.h"
#include "dlock/core/SemaphoreBuilder.h"
#include "dlock/core/SharedWatchdog.h"

namespace dlock {

struct ClientOptions {
  // The leases, outage tolerance and waiter lease of every primitive (LockOptions); the client sets
  // each one's name and default key from the name it is asked for, and `fair` by the call. An
  // owner label is recorded by getLock's locks only (the others record none).
  LockOptions lock;
  // The clock of leases and of the client's watchdog; null: the steady clock. A VirtualClock in tests.
  std::shared_ptr<Clock> clock;
  // The exclusive locks' wait strategy (LockBuilder::waitStrategy); null: NotifyWait.
  std::shared_ptr<IWait> waitStrategy;
};

class Client {
 public:
  // dlock::connect(uri): ConfigError for a bad URI, ConnectionError or BackendError when the
  // server cannot be reached or refuses (see connect.h; lazy_connect=true defers that).
  explicit Client(std::string_view uri, ClientOptions options = {});
  // Over `backend` (the memory one in tests). ConfigError when it is null or an option is out of
  // range (as LockBuilder::build says).
  explicit Client(std::shared_ptr<IOperator> backend, ClientOptions options = {});

  // Copies share the state; a move copies too, so a moved-from client still works.
  Client(const Client&) = default;
  Client& operator=(const Client&) = default;
  Client(Client&& other) noexcept : state_(other.state_) {}
  Client& operator=(Client&& other) noexcept {
    state_ = other.state_;
    return *this;
  }
  ~Client() = default;

  // Named get... after Redisson's: lock(name) would read as taking a lock. See the table above.
  [[nodiscard]] std::shared_ptr<ILock> getLock(std::string_view name);
  [[nodiscard]] std::shared_ptr<ILock> getFairLock(std::string_view name);
  // ConfigError when the backend has no read-write queue (Redlock).
  [[nodiscard]] std::shared_ptr<ReadWriteLock> getReadWriteLock(std::string_view name);
  // InvalidArgumentError for a capacity of 0 or above kMaxSemaphorePermits; ConfigError when the
  // backend keeps no semaphores (Redlock) or `name` was handed out with another capacity.
  [[nodiscard]] std::shared_ptr<Semaphore> getSemaphore(std::string_view name, std::uint32_t capacity);
  // The condition `condition` of the key `lockName` of getLock(lockName); for another key or the
  // fair lock, ILock::newCondition. ConfigError when the backend keeps no conditions.
  [[nodiscard]] Condition getCondition(std::string_view lockName, std::string_view condition);
  // ConfigError when the backend cannot keep an election (Redlock: ElectionBuilder::build says why).
  [[nodiscard]] std::shared_ptr<Election> getElection(std::string_view name);

  // Builders preset with the client's backend, clock and options (the name left to the caller).
  [[nodiscard]] LockBuilder lockBuilder() const;
  [[nodiscard]] SemaphoreBuilder semaphoreBuilder() const;
  [[nodiscard]] ElectionBuilder electionBuilder() const;

  [[nodiscard]] const std::shared_ptr<IOperator>& backend() const noexcept;

  // The stats of every lock and semaphore handed out, in the order it was first asked for (a
  // read-write lock's once, both sides' gauges in it); formatMetrics(client) prints them, and
  // the elections' metrics after them (formatElectionMetrics).
  [[nodiscard]] std::vector<LockStats> stats() const;
  // The elections handed out, in the order first asked for.
  [[nodiscard]] std::vector<std::shared_ptr<Election>> elections() const;

  // Closes everything handed out (see the top of this file). Idempotent.
  void close() noexcept;
  [[nodiscard]] bool closed() const noexcept;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// formatMetrics (dlock/core/Metrics.h) of everything the client handed out.
[[nodiscard]] std::string formatMetrics(const Client& client);

}  // namespace dlock
