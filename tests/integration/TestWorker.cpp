// dlock_test_worker — the other processes of multi-process tests (fork/exec, not threads).
//
//   increment URI KEY COUNTER N OUT [HOST:PORT]
//                                     N locked read-modify-write increments of the Redis string
//                                     COUNTER (GET then SET); appends "<counter seen> <fence>" per
//                                     acquisition to OUT. COUNTER lives on HOST:PORT when given
//                                     (a redlock URI names several servers), else on URI's server
//   hold URI KEY lease|watchdog MS    takes KEY with a fixed lease of MS, or under the watchdog
//                                     with a lease of MS; prints "acquired <fence>", then answers
//                                     lines on stdin: "held?" → "held yes|no",
//                                     "unlock" → "unlocked" or "error <type>"
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "RedisClient.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

using namespace std::chrono_literals;

std::pair<std::string, int> hostPort(const std::string& uri) {
  const auto start = uri.find("://") + 3;
  const auto colon = uri.rfind(':');
  return {uri.substr(start, colon - start), std::stoi(uri.substr(colon + 1))};
}

int increment(const std::string& uri, const std::string& key, const std::string& counter, int count,
              const std::string& out, const std::string& counterAt) {
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(10s).build();
  const auto [host, port] = hostPort(counterAt.empty() ? uri : "redis://" + counterAt);
  dlock::test::RedisClient client(host, port);
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
  if (mode == "watchdog") {
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

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "increment" && (argc == 7 || argc == 8)) {
      return increment(argv[2], argv[3], argv[4], std::atoi(argv[5]), argv[6], argc == 8 ? argv[7] : "");
    }
    if (mode == "hold" && argc == 6) return hold(argv[2], argv[3], argv[4], std::atoll(argv[5]));
    std::fprintf(stderr,
                 "usage: dlock_test_worker increment URI KEY COUNTER N OUT [HOST:PORT] | hold URI KEY lease|watchdog MS\n");
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_test_worker: %s\n", error.what());
    return 1;
  }
}
