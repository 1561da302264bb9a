// SPDX-License-Identifier: Apache-2.0
// dlock_test_worker — the other processes of multi-process tests (fork/exec, not threads).
//
//   increment URI KEY COUNTER N OUT [HOST:PORT]
//                                     N locked read-modify-write increments of the Redis string
//                                     COUNTER (GET then SET); appends "<counter seen> <fence>" per
//                                     acquisition to OUT. COUNTER lives on HOST:PORT when given
//                                     (a redlock URI names several servers), else on URI's server
//   hold URI KEY lease|watchdog|fair MS
//                                     takes KEY with a fixed lease of MS, or under the watchdog
//                                     with a lease of MS, or fair under the watchdog with a waiter
//                                     lease of MS; prints "acquired <fence>", then answers
//                                     lines on stdin: "held?" → "held yes|no",
//                                     "unlock" → "unlocked" or "error <type>"
//   sentinel-increment URI KEY COUNTER DONE NAME LEASE_MS STOP OUT
//                                     through a redis+sentinel URI, until the file STOP exists:
//                                     tryLock(KEY, 200 ms), then on the master the lock was taken
//                                     on, GET COUNTER and MULTI SET COUNTER+1, SADD DONE <NAME:i>
//                                     EXEC, then unlock. Appends one line per event to OUT, times
//                                     in steady-clock nanoseconds (CLOCK_MONOTONIC, comparable
//                                     across processes):
//                                       reached T ADDR           first answered attempt on ADDR
//                                       ok T ADDR ID VALUE FENCE  EXEC acknowledged
//                                       unknown T ADDR ID        EXEC sent, no reply
//                                       counter-error T ADDR     nothing written
//                                       ambiguous T              the master changed during
//                                                                tryLock: released, nothing written
//                                       error T acquire|unlock TYPE MESSAGE   a dlock exception
//   fork-first-call URI KEY THREADS START_US EVERY_US plain|fair   see ForkFirstCall.h
//   readwrite URI KEY reader|writer HOLD_MS COUNT OUT
//                                     holds KEY's read or write lock (watchdog) for HOLD_MS at a
//                                     time: a writer COUNT times, a reader until the Redis key
//                                     "stop" exists. Inside, an unfenced flag on URI's server: a
//                                     writer INCRs "writers" then GETs "readers", a reader INCRs
//                                     "readers" then GETs "writers" (DECR on the way out), so any
//                                     overlap is seen by one side. Appends per hold to OUT:
//                                     "<r|w> <own side's count> <other side's count> <wait µs>
//                                     <hold µs> <unlock µs>" (wait: the lock call; hold: from
//                                     holding to unlocked; unlock: the release's round trip)
//   permit-tally URI NAME CAPACITY ROUNDS TALLY OUT
//                                     ROUNDS times: one permit of the semaphore NAME (watchdog,
//                                     3 s lease), INCR the Redis string TALLY, append the value
//                                     seen to OUT, hold 20 ms, DECR TALLY, release (appending
//                                     "lost" when the release finds the permit's lease ended)
//   permit-hold URI NAME CAPACITY COUNT LEASE_MS
//                                     COUNT permits of NAME under the watchdog with a lease of
//                                     LEASE_MS; prints "acquired <fence>", then answers lines on
//                                     stdin: "release" → "released" or "error <type>"
//   timed-try URI KEY BUDGET_MS      connects to URI and calls tryLock(KEY, BUDGET_MS) (unlocking a
//                                     key it got); prints "took <ms> got <0|1> error <type|none>",
//                                     the time from before the connect to the outcome
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "ForkFirstCall.h"
#include "RedisClient.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/SemaphoreBuilder.h"
#include "dlock/sentinel/SentinelOperator.h"
#include "dlock/uri.h"

namespace {

using namespace std::chrono_literals;

// The server of a "redis://host:port" URI, or of a "host:port" address.
dlock::Endpoint serverOf(const std::string& uriOrAddress) {
  const bool isUri = uriOrAddress.find("://") != std::string::npos;
  return dlock::parseUri(isUri ? uriOrAddress : "redis://" + uriOrAddress).hosts.front();
}

int increment(const std::string& uri, const std::string& key, const std::string& counter, int count,
              const std::string& out, const std::string& counterAt) {
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(10s).build();
  const dlock::Endpoint server = serverOf(counterAt.empty() ? uri : counterAt);
  dlock::test::RedisClient client(server.host, server.port);
  std::ofstream log(out, std::ios::app);
  for (int i = 0; i < count; ++i) {
    lock->lock(key);
    const auto value = client.ok({"GET", counter});
    const long long seen = value.isNil() ? 0 : std::stoll(value.str);
    client.ok({"SET", counter, std::to_string(seen + 1)});
    log << seen << " " << lock->fencingToken(key) << "\n";
    lock->unlock(key);
  }
  return 0;
}

int hold(const std::string& uri, const std::string& key, const std::string& mode, long long millis) {
  dlock::LockBuilder builder;
  builder.backend(dlock::connect(uri));
  if (mode == "fair") {
    builder.fair().waiterLease(std::chrono::milliseconds(millis));
  } else if (mode == "watchdog") {
    builder.watchdogLease(std::chrono::milliseconds(millis));
  } else {
    builder.leaseTime(std::chrono::milliseconds(millis));
  }
  auto lock = builder.build();
  lock->lock(key);
  std::cout << "acquired " << lock->fencingToken(key) << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "held?") {
      std::cout << "held " << (lock->isHeld(key) ? "yes" : "no") << std::endl;
    } else if (line == "unlock") {
      try {
        lock->unlock(key);
        std::cout << "unlocked" << std::endl;
      } catch (const dlock::LockLostError&) {
        std::cout << "error LockLostError" << std::endl;
      } catch (const dlock::LockError& error) {
        std::cout << "error " << error.what() << std::endl;
      }
    }
  }
  return 0;
}

std::shared_ptr<dlock::Semaphore> semaphoreOn(const std::string& uri, const std::string& name, long capacity,
                                              std::chrono::milliseconds lease) {
  return dlock::SemaphoreBuilder()
      .backend(dlock::connect(uri))
      .name(name)
      .permits(static_cast<std::uint32_t>(capacity))
      .watchdogLease(lease)
      .build();
}

int permitTally(const std::string& uri, const std::string& name, long capacity, int rounds, const std::string& tally,
                const std::string& out) {
  auto semaphore = semaphoreOn(uri, name, capacity, 3s);
  const dlock::Endpoint server = serverOf(uri);
  dlock::test::RedisClient client(server.host, server.port);
  std::ofstream log(out, std::ios::app);
  for (int i = 0; i < rounds; ++i) {
    dlock::PermitLease permit = semaphore->acquire(1);
    log << client.ok({"INCR", tally}).integer << std::endl;
    std::this_thread::sleep_for(20ms);
    client.ok({"DECR", tally});
    try {
      permit.release();
    } catch (const dlock::LockLostError&) {
      log << "lost" << std::endl;  // told: the hold ran unprotected at its end
    }
  }
  return 0;
}

int permitHold(const std::string& uri, const std::string& name, long capacity, long count, long long millis) {
  auto semaphore = semaphoreOn(uri, name, capacity, std::chrono::milliseconds(millis));
  dlock::PermitLease permits = semaphore->acquire(static_cast<std::uint32_t>(count));
  std::cout << "acquired " << permits.fencingToken() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line != "release") continue;
    try {
      permits.release();
      std::cout << "released" << std::endl;
    } catch (const dlock::LockError& error) {
      std::cout << "error " << error.what() << std::endl;
    }
  }
  return 0;
}

const char* errorType(const std::exception& error) {
  if (dynamic_cast<const dlock::ConnectionError*>(&error) != nullptr) return "ConnectionError";
  if (dynamic_cast<const dlock::BackendError*>(&error) != nullptr) return "BackendError";
  if (dynamic_cast<const dlock::LockLostError*>(&error) != nullptr) return "LockLostError";
  if (dynamic_cast<const dlock::NotOwnerError*>(&error) != nullptr) return "NotOwnerError";
  if (dynamic_cast<const dlock::LockError*>(&error) != nullptr) return "LockError";
  return "other";
}

long long steadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int sentinelIncrement(const std::string& uri, const std::string& key, const std::string& counter,
                      const std::string& done, const std::string& name, long long leaseMillis,
                      const std::string& stop, const std::string& out) {
  auto backend = std::dynamic_pointer_cast<dlock::SentinelOperator>(dlock::connect(uri));
  if (!backend) throw std::runtime_error("not a redis+sentinel URI: " + uri);
  auto lock = dlock::LockBuilder().backend(backend).leaseTime(std::chrono::milliseconds(leaseMillis)).build();
  std::ofstream log(out, std::ios::app);
  std::map<std::string, std::unique_ptr<dlock::test::RedisClient>> clients;  // by master address
  std::set<std::string> reached;
  for (long i = 0; !std::filesystem::exists(stop); ++i) {
    const std::string before = backend->masterAddress();
    bool acquired = false;
    try {
      acquired = lock->tryLock(key, 200ms);
    } catch (const dlock::LockError& error) {
      log << "error " << steadyNanos() << " acquire " << errorType(error) << " " << error.what() << std::endl;
      std::this_thread::sleep_for(10ms);
      continue;
    }
    const std::string at = backend->masterAddress();
    if (before == at && reached.insert(at).second) log << "reached " << steadyNanos() << " " << at << std::endl;
    if (acquired && before != at) {
      // Taken on `before` or on `at`: the write could not be pinned to the lock's server.
      log << "ambiguous " << steadyNanos() << std::endl;
      (void)lock->unlockQuietly(key);
      continue;
    }
    if (!acquired) continue;

    // The critical section, on the server the lock was taken on.
    const std::string id = name + ":" + std::to_string(i);
    const std::uint64_t fence = lock->fencingToken(key);
    bool sent = false;
    try {
      auto& client = clients[at];
      if (!client) {
        const dlock::Endpoint server = serverOf(at);
        client = std::make_unique<dlock::test::RedisClient>(server.host, server.port, std::chrono::seconds(1));
      }
      const auto value = client->ok({"GET", counter});
      const long long next = (value.isNil() ? 0 : std::stoll(value.str)) + 1;
      (void)client->ok({"MULTI"});
      (void)client->command({"SET", counter, std::to_string(next)});
      (void)client->command({"SADD", done, id});
      sent = true;  // from here the write may land: only an I/O error can follow
      const auto exec = client->command({"EXEC"});
      if (exec.type == REDIS_REPLY_ARRAY) {
        log << "ok " << steadyNanos() << " " << at << " " << id << " " << next << " " << fence << std::endl;
      } else {  // EXECABORT (e.g. READONLY while queueing): nothing written
        log << "counter-error " << steadyNanos() << " " << at << " EXEC: " << exec.str << std::endl;
      }
    } catch (const std::exception& error) {
      clients.erase(at);
      if (sent) {
        log << "unknown " << steadyNanos() << " " << at << " " << id << std::endl;
      } else {
        log << "counter-error " << steadyNanos() << " " << at << " " << error.what() << std::endl;
      }
    }

    try {
      lock->unlock(key);
    } catch (const dlock::LockError& error) {
      log << "error " << steadyNanos() << " unlock " << errorType(error) << " " << error.what() << std::endl;
      // Once more after a connection problem; on failure the hold is forgotten, the lease ends.
      if (dynamic_cast<const dlock::ConnectionError*>(&error) != nullptr) (void)lock->unlockQuietly(key);
    }
  }
  return 0;
}

long long microsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

int readWrite(const std::string& uri, const std::string& key, const std::string& role, long long holdMillis, int count,
              const std::string& out) {
  auto rw = dlock::LockBuilder().backend(dlock::connect(uri)).buildReadWrite();
  const bool writer = role == "writer";
  const std::shared_ptr<dlock::ILock>& lock = writer ? rw->writeLock() : rw->readLock();
  const dlock::Endpoint server = serverOf(uri);
  dlock::test::RedisClient client(server.host, server.port);
  const std::string own = writer ? "writers" : "readers";
  const std::string other = writer ? "readers" : "writers";
  std::ofstream log(out, std::ios::app);
  for (int i = 0; writer ? i < count : client.ok({"EXISTS", "stop"}).integer == 0; ++i) {
    const auto asked = std::chrono::steady_clock::now();
    lock->lock(key);
    const long long wait = microsSince(asked);
    const auto holding = std::chrono::steady_clock::now();
    const long long mine = client.ok({"INCR", own}).integer;
    const auto seen = client.ok({"GET", other});
    std::this_thread::sleep_for(std::chrono::milliseconds(holdMillis));
    (void)client.ok({"DECR", own});
    const auto releasing = std::chrono::steady_clock::now();
    lock->unlock(key);
    log << (writer ? "w " : "r ") << mine << " " << (seen.isNil() ? "0" : seen.str) << " " << wait << " "
        << microsSince(holding) << " " << microsSince(releasing) << std::endl;
    if (writer) std::this_thread::sleep_for(std::chrono::milliseconds(holdMillis));  // readers flow between writes
  }
  return 0;
}

// timed-try: the time from before the connect to tryLock's outcome, and the outcome.
int timedTry(const std::string& uri, const std::string& key, long long budgetMs) {
  const auto start = std::chrono::steady_clock::now();
  const char* error = "none";
  bool got = false;
  try {
    auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).build();
    got = lock->tryLock(key, std::chrono::milliseconds(budgetMs));
    if (got) lock->unlock(key);
  } catch (const dlock::ConnectionError&) {
    error = "ConnectionError";
  } catch (const dlock::LockError&) {
    error = "LockError";
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("took %lld got %d error %s\n", static_cast<long long>(took.count()), got ? 1 : 0, error);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "increment" && (argc == 7 || argc == 8)) {
      return increment(argv[2], argv[3], argv[4], std::atoi(argv[5]), argv[6], argc == 8 ? argv[7] : "");
    }
    if (mode == "hold" && argc == 6) return hold(argv[2], argv[3], argv[4], std::atoll(argv[5]));
    if (mode == "fork-first-call" && argc == 8) {
      return dlock::test::forkAtFirstCalls(argv[2], argv[3], std::atoi(argv[4]), std::atol(argv[5]), std::atol(argv[6]),
                                           std::string(argv[7]) == "fair");
    }
    if (mode == "sentinel-increment" && argc == 10) {
      return sentinelIncrement(argv[2], argv[3], argv[4], argv[5], argv[6], std::atoll(argv[7]), argv[8], argv[9]);
    }
    if (mode == "readwrite" && argc == 8) {
      return readWrite(argv[2], argv[3], argv[4], std::atoll(argv[5]), std::atoi(argv[6]), argv[7]);
    }
    if (mode == "permit-tally" && argc == 8) {
      return permitTally(argv[2], argv[3], std::atol(argv[4]), std::atoi(argv[5]), argv[6], argv[7]);
    }
    if (mode == "permit-hold" && argc == 7) {
      return permitHold(argv[2], argv[3], std::atol(argv[4]), std::atol(argv[5]), std::atoll(argv[6]));
    }
    if (mode == "timed-try" && argc == 5) return timedTry(argv[2], argv[3], std::atoll(argv[4]));
    std::fprintf(stderr,
                 "usage: dlock_test_worker increment URI KEY COUNTER N OUT [HOST:PORT] | hold URI KEY lease|watchdog|fair MS\n"
                 "       | sentinel-increment URI KEY COUNTER DONE NAME LEASE_MS STOP OUT\n"
                 "       | readwrite URI KEY reader|writer HOLD_MS COUNT OUT\n"
                 "       | permit-tally URI NAME CAPACITY ROUNDS TALLY OUT | permit-hold URI NAME CAPACITY COUNT LEASE_MS\n"
                 "       | timed-try URI KEY BUDGET_MS\n");
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_test_worker: %s\n", error.what());
    return 1;
  }
}
