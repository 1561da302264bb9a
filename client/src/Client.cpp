// SPDX-License-Identifier: Apache-2.0
#include "dlock/Client.h"

#include <map>
#include <mutex>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/connect.h"
#include "dlock/core/ElectionMetrics.h"
#include "dlock/core/Metrics.h"

namespace dlock {
namespace {

enum class Kind { Lock, FairLock, ReadWrite, Semaphore, Election };

const char* nameOf(Kind kind) {
  switch (kind) {
    case Kind::Lock: return "a lock";
    case Kind::FairLock: return "a fair lock";
    case Kind::ReadWrite: return "a read-write lock";
    case Kind::Semaphore: return "a semaphore";
    case Kind::Election: return "an election";
  }
  return "a primitive";
}

// One primitive handed out; exactly one of the pointers is set, by `kind`.
struct Entry {
  Kind kind;
  std::shared_ptr<ILock> lock;
  std::shared_ptr<ReadWriteLock> readWrite;
  std::shared_ptr<Semaphore> semaphore;
  std::shared_ptr<Election> election;

  // Not for an election, whose metrics are its own (formatElectionMetrics).
  [[nodiscard]] LockStats stats() const {
    if (semaphore) return semaphore->stats();
    if (readWrite) return readWrite->readLock()->stats();
    return lock->stats();
  }
  void close() const noexcept {
    if (semaphore) semaphore->close();
    if (readWrite) readWrite->writeLock()->close();  // closes both sides
    if (lock) lock->close();
    if (election) election->close();
  }
};

}  // namespace

struct Client::State {
  State(std::shared_ptr<IOperator> backendIn, ClientOptions optionsIn)
      : backend(std::move(backendIn)), options(std::move(optionsIn)), watchdog(options.clock) {}

  const std::shared_ptr<IOperator> backend;
  const ClientOptions options;
  const SharedWatchdog watchdog;  // every primitive's leases, one thread

  mutable std::mutex mutex;
  std::vector<Entry> entries;                   // guarded by mutex; in the order first asked for
  std::map<std::string, std::size_t, std::less<>> byName;  // guarded by mutex; index in entries
  bool closed = false;                          // guarded by mutex

  // `exclusive`: getLock's kind, the one that records an owner label.
  [[nodiscard]] LockBuilder lockBuilder(std::string_view name, bool fair, bool exclusive = true) const {
    LockOptions lock = options.lock;
    lock.name = std::string(name);
    lock.defaultKey = std::string(name);
    lock.fair = fair;
    if (fair || !exclusive) lock.ownerLabel.reset();
    LockBuilder builder;
    builder.backend(backend).options(std::move(lock)).clock(watchdog.clock()).watchdog(watchdog);
    if (options.waitStrategy) builder.waitStrategy(options.waitStrategy);
    return builder;
  }

  // The entry named `name` if it is of `kind`; nullptr when there is none; ConfigError when the
  // name is another kind's. InterruptedError once closed. `mutex` held.
  const Entry* find(std::string_view name, Kind kind, const char* call) const {
    if (closed) {
      throw InterruptedError(std::string("dlock: Client ") + call + " " + detail::quoteKey(name) +
                             ": the client was closed");
    }
    const auto it = byName.find(name);
    if (it == byName.end()) return nullptr;
    const Entry& entry = entries[it->second];
    if (entry.kind != kind) {
      throw ConfigError(std::string("dlock: Client ") + call + " " + detail::quoteKey(name) + ": the name is " +
                        nameOf(entry.kind) + "'s already (their metrics would share a label); give " +
                        nameOf(kind) + " another name");
    }
    return &entry;
  }

  const Entry& add(std::string_view name, Entry entry) {
    byName.emplace(std::string(name), entries.size());
    entries.push_back(std::move(entry));
    return entries.back();
  }

  std::shared_ptr<ILock> lock(std::string_view name, Kind kind, const char* call) {
    detail::checkKey(name, call);
    std::lock_guard<std::mutex> guard(mutex);
    if (const Entry* entry = find(name, kind, call)) return entry->lock;
    return add(name, Entry{kind, lockBuilder(name, kind == Kind::FairLock).build(), nullptr, nullptr, nullptr}).lock;
  }
};

Client::Client(std::string_view uri, ClientOptions options) : Client(connect(uri), std::move(options)) {}

Client::Client(std::shared_ptr<IOperator> backend, ClientOptions options)
    : state_(std::make_shared<State>(std::move(backend), std::move(options))) {
  if (!state_->backend) throw ConfigError("dlock: Client: no backend; pass an IOperator or a URI");
  // The options' faults now, not at the first get...: a lock that is built and dropped sends nothing.
  (void)state_->lockBuilder(state_->options.lock.defaultKey, false).build();
}

std::shared_ptr<ILock> Client::getLock(std::string_view name) { return state_->lock(name, Kind::Lock, "getLock"); }

std::shared_ptr<ILock> Client::getFairLock(std::string_view name) {
  return state_->lock(name, Kind::FairLock, "getFairLock");
}

std::shared_ptr<ReadWriteLock> Client::getReadWriteLock(std::string_view name) {
  detail::checkKey(name, "getReadWriteLock");
  std::lock_guard<std::mutex> guard(state_->mutex);
  if (const Entry* entry = state_->find(name, Kind::ReadWrite, "getReadWriteLock")) return entry->readWrite;
  auto readWrite = state_->lockBuilder(name, false, false).buildReadWrite();
  return state_->add(name, Entry{Kind::ReadWrite, nullptr, std::move(readWrite), nullptr, nullptr}).readWrite;
}

std::shared_ptr<Semaphore> Client::getSemaphore(std::string_view name, std::uint32_t capacity) {
  detail::checkKey(name, "getSemaphore");
  Semaphore::checkCapacity(capacity, "getSemaphore");
  std::lock_guard<std::mutex> guard(state_->mutex);
  if (const Entry* entry = state_->find(name, Kind::Semaphore, "getSemaphore")) {
    if (entry->semaphore->capacity() != capacity) {
      throw ConfigError("dlock: Client getSemaphore " + detail::quoteKey(name) + ": handed out with a capacity of " +
                        std::to_string(entry->semaphore->capacity()) + ", asked for " + std::to_string(capacity) +
                        "; Semaphore::resize changes it");
    }
    return entry->semaphore;
  }
  auto semaphore = semaphoreBuilder().name(std::string(name)).permits(capacity).build();
  return state_->add(name, Entry{Kind::Semaphore, nullptr, nullptr, std::move(semaphore), nullptr}).semaphore;
}

Condition Client::getCondition(std::string_view lockName, std::string_view condition) {
  return getLock(lockName)->newCondition(lockName, condition);
}

std::shared_ptr<Election> Client::getElection(std::string_view name) {
  detail::checkKey(name, "getElection");
  std::lock_guard<std::mutex> guard(state_->mutex);
  if (const Entry* entry = state_->find(name, Kind::Election, "getElection")) return entry->election;
  auto election = electionBuilder().name(std::string(name)).build();
  return state_->add(name, Entry{Kind::Election, nullptr, nullptr, nullptr, std::move(election)}).election;
}

LockBuilder Client::lockBuilder() const {
  LockBuilder builder = state_->lockBuilder(state_->options.lock.defaultKey, state_->options.lock.fair);
  builder.name(state_->options.lock.name);
  return builder;
}

SemaphoreBuilder Client::semaphoreBuilder() const {
  const LockOptions& lock = state_->options.lock;
  SemaphoreBuilder builder;
  builder.backend(state_->backend)
      .clock(state_->watchdog.clock())
      .watchdog(state_->watchdog)
      .watchdogLease(lock.watchdogLease)
      .waiterLease(lock.waiterLease)
      .outageTolerance(lock.outageTolerance);
  if (lock.leaseTime) builder.leaseTime(*lock.leaseTime);
  return builder;
}

ElectionBuilder Client::electionBuilder() const {
  ElectionBuilder builder;
  builder.backend(state_->backend).clock(state_->watchdog.clock()).watchdog(state_->watchdog);
  return builder;
}

const std::shared_ptr<IOperator>& Client::backend() const noexcept { return state_->backend; }

std::vector<LockStats> Client::stats() const {
  std::lock_guard<std::mutex> guard(state_->mutex);
  std::vector<LockStats> stats;
  stats.reserve(state_->entries.size());
  for (const Entry& entry : state_->entries) {
    if (!entry.election) stats.push_back(entry.stats());
  }
  return stats;
}

std::vector<std::shared_ptr<Election>> Client::elections() const {
  std::lock_guard<std::mutex> guard(state_->mutex);
  std::vector<std::shared_ptr<Election>> elections;
  for (const Entry& entry : state_->entries) {
    if (entry.election) elections.push_back(entry.election);
  }
  return elections;
}

void Client::close() noexcept {
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->closed = true;
  }
  // Closed entries never change (get... adds only while open), so they are read without the
  // mutex: a close waits for its releases, and stats() meanwhile need not.
  for (const Entry& entry : state_->entries) entry.close();
}

bool Client::closed() const noexcept {
  std::lock_guard<std::mutex> guard(state_->mutex);
  return state_->closed;
}

std::string formatMetrics(const Client& client) {
  std::string text = formatMetrics(client.stats());
  const std::vector<std::shared_ptr<Election>> elections = client.elections();
  if (!elections.empty()) text += formatElectionMetrics(elections);
  return text;
}

}  // namespace dlock
