// SPDX-License-Identifier: Apache-2.0
// cache_refresh — N requests find the same cache entry expired at once (a thundering herd).
// Exactly one rebuilds it, under the lock rebuild:cache:<name> taken without waiting; the others
// serve the stale value at once rather than all rebuilding it or queueing behind the rebuild.
//
//   dlock_example_cache_refresh [--requests 16] [--rebuild-ms 500] [--name daily-report]
//                               --uri redis://HOST:PORT (or DLOCK_URI)
//
// The entry is the hash cache:<name> (value, version, fresh_until in Unix ms, rebuilds). The
// program marks it expired, sends the requests from threads released together, and checks:
// one rebuild, every request answered with a value, no request waited for the rebuild.
// Exit: 0 ok, 1 failed check or error, 2 usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/AppRedis.h"
#include "CacheEntry.h"
#include "CacheRequests.h"
#include "dlock/dlock.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using examples::AppRedis;
using examples::unixMillis;

enum class Served { Fresh, Stale, Rebuilt, Failed };

struct Request {
  Served served = Served::Failed;
  std::string value;
  std::string error;
  Clock::time_point start, end;
};

// One request: a fresh entry is served; an expired one is rebuilt by whoever gets the lock at
// once, and served stale by everyone else.
Served handle(AppRedis& redis, dlock::ILock& lock, const std::string& name, std::chrono::milliseconds rebuildTime,
              std::string& value) {
  const std::string key = "cache:" + name;
  examples::CacheEntry entry = examples::readEntry(redis, key);
  value = entry.value;
  if (entry.fresh) return Served::Fresh;

  dlock::AcquireOptions noWait;
  noWait.waitTime = 0ms;  // try once: a request must never queue behind the rebuild
  dlock::Lease lease = lock.acquire("rebuild:" + key, noWait);
  if (!lease) return Served::Stale;

  // Someone may have rebuilt it between our read and our lock: check again before the work.
  entry = examples::readEntry(redis, key);
  value = entry.value;
  if (entry.fresh) {
    lease.release();
    return Served::Fresh;
  }
  std::this_thread::sleep_for(rebuildTime);  // the expensive part: queries, rendering, ...
  value = name + " v" + std::to_string(entry.version + 1);
  examples::storeRebuilt(redis, key, entry, value);
  lease.release();  // LockLostError if the lease ended during the rebuild
  return Served::Rebuilt;
}

int run(const std::string& uri, int requests, std::chrono::milliseconds rebuildTime, const std::string& name) {
  if (requests < 2) throw examples::UsageError("--requests must be at least 2");
  const std::string key = "cache:" + name;
  const std::string stale = name + " v1";
  AppRedis setup(uri);
  (void)setup.command({"DEL", key});
  (void)setup.command({"HSET", key, "value", stale, "version", "1", "fresh_until", std::to_string(unixMillis() - 1),
                       "rebuilds", "0"});

  // No fixed lease: the watchdog renews it while a slow rebuild runs.
  const auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).build();
  std::vector<Request> results(static_cast<std::size_t>(requests));
  examples::sendTogether(uri, results, Served::Failed, [&](AppRedis& redis, Request& out) {
    return handle(redis, *lock, name, rebuildTime, out.value);
  });

  int fresh = 0, staleServed = 0, rebuilds = 0, failed = 0, withoutValue = 0, waited = 0;
  Clock::time_point rebuildEnd{};
  for (const auto& result : results) {
    if (result.served == Served::Rebuilt) rebuildEnd = std::max(rebuildEnd, result.end);
  }
  Clock::duration slowestStale{};
  for (const auto& result : results) {
    switch (result.served) {
      case Served::Fresh: ++fresh; break;
      case Served::Stale:
        ++staleServed;
        slowestStale = std::max(slowestStale, result.end - result.start);
        // A stale answer that came back after the rebuild ended would have waited for it.
        if (rebuildEnd != Clock::time_point{} && result.end > rebuildEnd) ++waited;
        break;
      case Served::Rebuilt: ++rebuilds; break;
      case Served::Failed:
        ++failed;
        std::fprintf(stderr, "request failed: %s\n", result.error.c_str());
        break;
    }
    if (result.served != Served::Failed && result.value.empty()) ++withoutValue;
  }
  AppRedis checker(uri);
  const long long storedRebuilds = checker.hashInt(key, "rebuilds");
  const long long lockWaitMs = lock->stats().waitTime.count();
  const bool ok = rebuilds == 1 && storedRebuilds == 1 && failed == 0 && withoutValue == 0 && waited == 0 &&
                  lockWaitMs == 0 && fresh + staleServed + rebuilds == requests;

  std::printf("cache refresh of '%s' (%d requests, rebuild takes %lld ms): rebuilt %d (stored count %lld), "
              "served stale %d, served fresh %d, failed %d\n",
              name.c_str(), requests, static_cast<long long>(rebuildTime.count()), rebuilds, storedRebuilds,
              staleServed, fresh, failed);
  std::printf("  requests without a value: %d; stale answers after the rebuild ended: %d; "
              "slowest stale answer %lld ms; time spent waiting for the lock: %lld ms\n",
              withoutValue, waited,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(slowestStale).count()),
              lockWaitMs);
  std::printf("RESULT %s requests=%d rebuilds=%d stored_rebuilds=%lld stale=%d fresh=%d failed=%d no_value=%d "
              "waited=%d\n",
              ok ? "ok" : "FAILED", requests, rebuilds, storedRebuilds, staleServed, fresh, failed, withoutValue,
              waited);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return examples::cacheMain(argc, argv, "dlock_example_cache_refresh", run); }
