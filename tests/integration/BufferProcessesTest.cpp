// SPDX-License-Identifier: Apache-2.0
// The bounded buffer across processes on a real redis-server (dlock_buffer_worker): a list of at
// most 16 items under one lock key, with the conditions not-full and not-empty. 4 producer and
// 4 consumer processes: every item is consumed exactly once and the list never holds more than
// 16 (checked by each producer inside its hold). A consumer killed with SIGKILL inside await,
// then signalled (the server shows its place), stalls the rest by at most one waiter lease.
// DLOCK_BUFFER_ITEMS sets the items per producer (default 10,000; 1,000 in a sanitizer build).
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/IConditionOperator.h"
#include "dlock/connect.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using Steady = std::chrono::steady_clock;

namespace {

constexpr int kProducers = 4;
constexpr int kConsumers = 4;

int itemsPerProducer() {
  if (const char* items = std::getenv("DLOCK_BUFFER_ITEMS")) return std::atoi(items);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 1000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return 1000;
#else
  return 10000;
#endif
#else
  return 10000;
#endif
}

// One buffer on `server`: its lock key, its list, the lock kind and waiter lease of every process.
struct Buffer {
  const RedisProcess& server;
  std::string key;
  std::string list;
  std::string lock;  // "fair" or "default"
  std::chrono::milliseconds waiterLease;
  std::string outDir;

  std::unique_ptr<ChildProcess> producer(const std::string& name, int count) const {
    return std::make_unique<ChildProcess>(std::vector<std::string>{DLOCK_BUFFER_WORKER, "producer", server.uri(), key,
                                                                   list, name, std::to_string(count), lock,
                                                                   std::to_string(waiterLease.count())});
  }
  std::string consumerOut(int i) const { return outDir + "/consumer-" + std::to_string(i); }
  std::unique_ptr<ChildProcess> consumer(int i) const {
    std::remove(consumerOut(i).c_str());
    return std::make_unique<ChildProcess>(std::vector<std::string>{DLOCK_BUFFER_WORKER, "consumer", server.uri(), key,
                                                                   list, consumerOut(i), lock,
                                                                   std::to_string(waiterLease.count())});
  }
};

// A producer's end: its exit status 0 and no violation. Returns its awaits on not-full (-1 when
// it did not end cleanly).
long long producedCleanly(ChildProcess& producer) {
  const auto line = producer.readLine(600s);
  const int status = producer.wait();
  INFO("producer said: " << line.value_or("(nothing)") << ", exit " << status);
  long long violations = -1, waits = -1;
  std::istringstream said(line.value_or(""));
  std::string done;
  const bool parsed = static_cast<bool>(said >> done >> violations >> waits) && done == "done";
  CHECK(parsed);
  CHECK(violations == 0);
  CHECK(status == 0);
  return parsed && violations == 0 && status == 0 ? waits : -1;
}

struct Consumed {
  std::map<std::string, int> times;  // item → how often it was consumed
  std::vector<long long> at;         // CLOCK_MONOTONIC ns of each consumption, sorted
};

Consumed readConsumed(const Buffer& buffer, int consumers) {
  Consumed consumed;
  for (int i = 0; i < consumers; ++i) {
    std::ifstream in(buffer.consumerOut(i));
    std::string item;
    long long at = 0;
    while (in >> item >> at) {
      ++consumed.times[item];
      consumed.at.push_back(at);
    }
  }
  std::sort(consumed.at.begin(), consumed.at.end());
  return consumed;
}

// Every item NAME:i of `names` (i < count) consumed once, nothing else but the stop items.
void checkEachOnce(const Consumed& consumed, const std::vector<std::string>& names, int count, int stops) {
  int missing = 0, repeated = 0, unknown = 0;
  for (const auto& name : names) {
    for (int i = 0; i < count; ++i) {
      const auto found = consumed.times.find(name + ":" + std::to_string(i));
      if (found == consumed.times.end()) {
        ++missing;
      } else if (found->second != 1) {
        ++repeated;
      }
    }
  }
  for (const auto& [item, times] : consumed.times) {
    if (item.rfind("stop:", 0) != 0 && std::find_if(names.begin(), names.end(), [&item = item](const std::string& name) {
                                         return item.rfind(name + ":", 0) == 0;
                                       }) == names.end()) {
      ++unknown;
    }
  }
  CHECK(missing == 0);
  CHECK(repeated == 0);
  CHECK(unknown == 0);
  CHECK(consumed.times.size() == names.size() * static_cast<std::size_t>(count) + static_cast<std::size_t>(stops));
}

// Ends the consumers: one stop item each, put as a producer puts items.
void stopConsumers(const Buffer& buffer, int live) {
  const auto stops = buffer.producer("stop", live);
  REQUIRE(stops->readLine(60s) == std::optional<std::string>("ready"));
  stops->writeLine("go");
  CHECK(producedCleanly(*stops) >= 0);
}

std::string testName(const std::string& name) { return "dlock-test:{" + std::to_string(::getpid()) + ":" + name + "}"; }

// 4 producers x `count` items through 4 consumers on a `lock` key; checks each item once and no
// violation, and says how long it took.
void runBuffer(const RedisProcess& server, const dlock::test::TempDir& dir, const std::string& lock, int count) {
  const Buffer buffer{server, testName("buffer-" + lock), testName("buffer-" + lock) + ":items", lock, 5000ms,
                      dir.path()};
  auto backend = dlock::connect(server.uri());
  auto& conditions = dynamic_cast<dlock::IConditionOperator&>(*backend);
  const auto started = Steady::now();
  std::vector<std::unique_ptr<ChildProcess>> consumers, producers;
  std::vector<std::string> names;
  for (int p = 0; p < kProducers; ++p) {
    names.push_back("p" + std::to_string(p));
    producers.push_back(buffer.producer(names.back(), count));
  }
  for (auto& producer : producers) REQUIRE(producer->readLine(60s) == std::optional<std::string>("ready"));
  for (auto& producer : producers) producer->writeLine("go");
  // The consumers start once the list is full and every producer waits for room (the server
  // shows them on not-full): the capacity is under pressure from the first item on. (A list over
  // capacity ends the wait too: the producers report it.)
  dlock::test::RedisClient data(server.host(), server.port());
  REQUIRE(eventually(
      [&] {
        return conditions.inspectCondition(buffer.key, "not-full").waiters.size() == kProducers ||
               data.ok({"LLEN", buffer.list}).integer > 16;
      },
      60s));
  for (int i = 0; i < kConsumers; ++i) consumers.push_back(buffer.consumer(i));
  long long waits = 0;
  for (auto& producer : producers) waits += producedCleanly(*producer);
  stopConsumers(buffer, kConsumers);
  for (auto& consumer : consumers) CHECK(consumer->wait() == 0);
  const double seconds = std::chrono::duration<double>(Steady::now() - started).count();
  MESSAGE(lock << " lock: " << kProducers * count << " items through the buffer in " << seconds << " s ("
               << kProducers * count / seconds << " items/s); the producers waited for room " << waits << " times");
  CHECK(waits >= kProducers);
  checkEachOnce(readConsumed(buffer, kConsumers), names, count, kConsumers);
}

}  // namespace

TEST_SUITE("BufferProcesses") {
  TEST_CASE("bounded buffer of 16 across processes: 4 producers x N items through 4 consumers, each item once, never over capacity") {
    RedisProcess server;
    dlock::test::TempDir dir;
    runBuffer(server, dir, "fair", itemsPerProducer());
  }

  TEST_CASE("bounded buffer on the default (exclusive) lock: 4 producers x N items through 4 consumers, each item once, never over capacity") {
    RedisProcess server;
    dlock::test::TempDir dir;
    runBuffer(server, dir, "default", itemsPerProducer());
  }

  TEST_CASE("bounded buffer: a consumer killed with SIGKILL inside await, then signalled, stalls the rest by at most one waiter lease") {
    RedisProcess server;
    dlock::test::TempDir dir;
    constexpr auto kWaiterLease = 1500ms;
    const Buffer buffer{server, testName("buffer-kill"), testName("buffer-kill") + ":items", "fair", kWaiterLease,
                        dir.path()};
    auto backend = dlock::connect(server.uri());
    auto& conditions = dynamic_cast<dlock::IConditionOperator&>(*backend);
    const auto waiters = [&] { return conditions.inspectCondition(buffer.key, "not-empty").waiters; };

    // Consumer 0 waits first (the list is empty): the only waiter, so its token is the one shown.
    std::vector<std::unique_ptr<ChildProcess>> consumers;
    consumers.push_back(buffer.consumer(0));
    REQUIRE(eventually([&] { return waiters().size() == 1; }, 60s));
    const std::string victim = waiters().front().token;
    for (int i = 1; i < kConsumers; ++i) consumers.push_back(buffer.consumer(i));
    REQUIRE(eventually([&] { return waiters().size() == kConsumers; }, 60s));
    consumers[0]->signal(SIGKILL);
    CHECK(consumers[0]->wait() == 128 + SIGKILL);
    // Its place outlives it (the server shows it, the longest waiter): the next signal goes to it.
    REQUIRE(waiters().front().token == victim);

    // The producers are started and connected first, so that the stall below is the dead
    // consumer's claim and not their start-up.
    constexpr int kItems = 250;
    std::vector<std::unique_ptr<ChildProcess>> producers;
    std::vector<std::string> names;
    for (int p = 0; p < kProducers; ++p) {
      names.push_back("p" + std::to_string(p));
      producers.push_back(buffer.producer(names.back(), kItems));
    }
    for (auto& producer : producers) REQUIRE(producer->readLine(60s) == std::optional<std::string>("ready"));

    // The first item, put here: its signal moves the dead consumer into the key's queue, and this
    // release hands the key to it. The live consumers get items only once that claim has ended.
    auto lock = dlock::LockBuilder().backend(backend).fair().waiterLease(kWaiterLease).build();
    auto notEmpty = lock->newCondition(buffer.key, "not-empty");
    dlock::test::RedisClient data(server.host(), server.port());
    lock->lock(buffer.key);
    data.ok({"RPUSH", buffer.list, "first:0"});
    notEmpty.signal();
    const auto left = waiters();
    CHECK(left.size() == kConsumers - 1);
    CHECK(std::none_of(left.begin(), left.end(), [&](const auto& waiter) { return waiter.token == victim; }));
    lock->unlock(buffer.key);
    const long long handedAt =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch()).count();
    for (auto& producer : producers) producer->writeLine("go");

    for (auto& producer : producers) CHECK(producedCleanly(*producer) >= 0);
    stopConsumers(buffer, kConsumers - 1);
    for (std::size_t i = 1; i < consumers.size(); ++i) CHECK(consumers[i]->wait() == 0);

    Consumed consumed = readConsumed(buffer, kConsumers);
    REQUIRE(!consumed.at.empty());
    // The stall: from the hand-off to the dead consumer to the first item a live one took.
    const double stallMs = static_cast<double>(consumed.at.front() - handedAt) / 1e6;
    // The machine's own pace: the longest gap between two consumptions once the stall was over.
    double paceMs = 0;
    for (std::size_t i = 1; i < consumed.at.size(); ++i) {
      paceMs = std::max(paceMs, static_cast<double>(consumed.at[i] - consumed.at[i - 1]) / 1e6);
    }
    // A place lasts one waiter lease from its last renewal, renewed every third of it (the tick);
    // the slack is twice the pace measured in this run (scheduling, a producer's start-up).
    const double boundMs =
        static_cast<double>(kWaiterLease.count()) + static_cast<double>(kWaiterLease.count()) / 3 + 2 * paceMs;
    MESSAGE("stall after the dead consumer's hand-off: " << stallMs << " ms; longest gap after it " << paceMs
                                                         << " ms; bound " << boundMs << " ms");
    CHECK(stallMs <= boundMs);
    CHECK(consumed.times.count("first:0") == 1);
    consumed.times.erase("first:0");
    checkEachOnce(consumed, names, kItems, kConsumers - 1);
  }
}
