// SPDX-License-Identifier: Apache-2.0
// config_reload — a service's configuration (the hash config:<name>, fields endpoint and pool,
// which must always name the same version) is read all the time by many request handlers and
// now and then reloaded. Handlers read it under the read lock config:<name> of a ReadWriteLock,
// all at once; the reloader rewrites it field by field under the write lock, so no handler ever
// sees half a reload, and the reload is not starved by the stream of readers.
//
//   dlock_example_config_reload [--readers 6] [--reloads 5] [--name payments] [--unlocked 0|1]
//                               --uri redis://HOST:PORT (or DLOCK_URI)
//
// --unlocked 1 reads and reloads without the lock, to show the check fail (torn reads).
// The program checks: no handler saw endpoint and pool of different versions, handlers read at
// the same time (more than one inside at once), every reload was done and stored.
// Exit: 0 ok, 1 failed check or error, 2 usage.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/AppRedis.h"
#include "dlock/dlock.h"

namespace {

using namespace std::chrono_literals;
using examples::AppRedis;

struct Tally {
  std::atomic<int> reads{0};
  std::atomic<int> torn{0};
  std::atomic<int> inside{0};      // handlers reading now
  std::atomic<int> mostInside{0};  // the most at once
  std::atomic<int> readerBesideReload{0};
  std::atomic<bool> reloading{false};
  std::atomic<bool> done{false};
};

// One request handler's read of the configuration: two fields, which must agree.
void readConfig(AppRedis& redis, const std::string& key, Tally& tally) {
  const int now = ++tally.inside;
  int most = tally.mostInside.load();
  while (now > most && !tally.mostInside.compare_exchange_weak(most, now)) {
  }
  if (tally.reloading) ++tally.readerBesideReload;
  const std::string endpoint = redis.command({"HGET", key, "endpoint"}).str;
  std::this_thread::sleep_for(2ms);  // the handler uses the endpoint, then needs the pool
  const std::string pool = redis.command({"HGET", key, "pool"}).str;
  if (endpoint.substr(endpoint.find('@')) != pool.substr(pool.find('@'))) ++tally.torn;
  ++tally.reads;
  --tally.inside;
}

// A reload: the new version written field by field (as a real reload parses and applies each).
void reload(AppRedis& redis, const std::string& key, int version, Tally& tally) {
  tally.reloading = true;
  const std::string v = "@v" + std::to_string(version);
  (void)redis.command({"HSET", key, "endpoint", "db" + v});
  std::this_thread::sleep_for(5ms);
  (void)redis.command({"HSET", key, "pool", "32" + v, "version", std::to_string(version)});
  tally.reloading = false;
}

int run(const std::string& uri, int readers, int reloads, const std::string& name, bool unlocked) {
  if (readers < 2) throw examples::UsageError("--readers must be at least 2");
  const std::string key = "config:" + name;
  AppRedis setup(uri);
  (void)setup.command({"HSET", key, "endpoint", "db@v0", "pool", "32@v0", "version", "0"});

  // No fixed lease: the watchdog renews every hold, each reader's own.
  const auto rw = dlock::LockBuilder().backend(dlock::connect(uri)).buildReadWrite();
  Tally tally;
  std::vector<std::thread> handlers;
  for (int i = 0; i < readers; ++i) {
    handlers.emplace_back([&] {
      AppRedis redis(uri);  // one connection per thread: a redisContext is not thread-safe
      while (!tally.done) {
        if (unlocked) {
          readConfig(redis, key, tally);
          continue;
        }
        DISTRIBUTED_READ_LOCK_WITH(rw, key);
        readConfig(redis, key, tally);
      }
    });
  }
  AppRedis reloader(uri);
  for (int version = 1; version <= reloads; ++version) {
    std::this_thread::sleep_for(20ms);  // handlers read between reloads
    if (unlocked) {
      reload(reloader, key, version, tally);
      continue;
    }
    DISTRIBUTED_WRITE_LOCK_WITH(rw, key);
    reload(reloader, key, version, tally);
  }
  tally.done = true;
  for (auto& handler : handlers) handler.join();

  const long long stored = setup.hashInt(key, "version");
  const bool ok = tally.torn == 0 && tally.readerBesideReload == 0 && tally.mostInside > 1 && stored == reloads;
  std::printf("config reload of '%s' (%d handlers, %d reloads%s): %d reads, %d torn, %d read beside a reload, "
              "at most %d handlers reading at once, stored version %lld\n",
              name.c_str(), readers, reloads, unlocked ? ", without the lock" : "", tally.reads.load(),
              tally.torn.load(), tally.readerBesideReload.load(), tally.mostInside.load(), stored);
  std::printf("RESULT %s reads=%d torn=%d beside_reload=%d most_readers=%d version=%lld\n", ok ? "ok" : "FAILED",
              tally.reads.load(), tally.torn.load(), tally.readerBesideReload.load(), tally.mostInside.load(), stored);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const examples::CommandLine args(argc, argv);
    if (!args.mode().empty()) throw examples::UsageError("unexpected argument " + args.mode());
    return run(args.uri(), args.number("readers", 6), args.number("reloads", 5), args.text("name", "payments"),
               args.number("unlocked", 0) != 0);
  } catch (const examples::UsageError& error) {
    std::fprintf(stderr,
                 "dlock_example_config_reload: %s\n"
                 "usage: dlock_example_config_reload [--readers 6] [--reloads 5] [--name payments] [--unlocked 0|1]\n"
                 "                                   --uri redis://HOST:PORT (or DLOCK_URI)\n",
                 error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_example_config_reload: %s\n", error.what());
    return 1;
  }
}
