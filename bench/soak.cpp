// SPDX-License-Identifier: Apache-2.0
// soak — a long run under faults: W worker processes make N acquisitions in all on a few keys,
// each doing a locked read-modify-write of the key's counter and logging (counter seen, fencing
// token); meanwhile this process injects faults: the workers' lock connections killed
// (CLIENT KILL), the server paused (CLIENT PAUSE) or busy (DEBUG SLEEP). Afterwards it checks
// mutual exclusion (no counter value seen twice, every counter equal to its increments) and the
// fencing order (tokens rising with the counter), and prints the figures as one JSON line.
// Usage: dlock_bench_soak redis://127.0.0.1:PORT [workers] [acquisitions] [keys]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "BenchReport.h"
#include "RawRedis.h"
#include "Workers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

using namespace std::chrono_literals;

struct Entry {
  int key;
  long long seen;
  unsigned long long fence;
};

struct Errors {
  long long connection = 0, backend = 0, lost = 0, timeouts = 0, other = 0;
};

// `uri` with `options` ("a=1&b=2") added to its query, which it may have already.
std::string withOptions(const std::string& uri, const std::string& options) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + options;
}

// One worker: `count` acquisitions on random keys; faults make calls fail, and it carries on.
int worker(const std::string& uri, int id, long long count, int keys, const std::string& out) {
  // Reconnect warnings are the expected effect of the faults here: keep errors only.
  spdlog::stderr_color_mt("dlock")->set_level(spdlog::level::err);
  auto lock = dlock::LockBuilder()
                  .backend(dlock::connect(withOptions(uri, "connect_timeout=500ms&command_timeout=500ms")))
                  .leaseTime(10s)
                  .build();
  dlock::bench::RawRedis data(uri);
  data.command({"CLIENT", "SETNAME", "soak-data"});  // spared by the fault injector
  std::mt19937 random(static_cast<unsigned>(id) * 7919U + 1U);
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(count));
  Errors errors;
  long long done = 0;
  while (done < count) {
    const int key = static_cast<int>(random() % static_cast<unsigned>(keys));
    const std::string name = "soak:" + std::to_string(key);
    try {
      if (!lock->tryLock(name, 5s)) {
        ++errors.timeouts;
        continue;
      }
    } catch (const dlock::ConnectionError&) {
      ++errors.connection;
      continue;
    } catch (const dlock::BackendError&) {
      ++errors.backend;
      continue;
    }
    const std::string counter = "soak:counter:" + std::to_string(key);
    const std::string value = data.text({"GET", counter});
    const long long seen = value.empty() ? 0 : std::atoll(value.c_str());
    data.command({"SET", counter, std::to_string(seen + 1)});
    entries.push_back({key, seen, lock->fencingToken(name)});
    ++done;
    for (int attempt = 0;; ++attempt) {
      try {
        lock->unlock(name);
        break;
      } catch (const dlock::ConnectionError&) {
        ++errors.connection;
        if (attempt == 50) {
          lock->unlockQuietly(name);
          break;
        }
        std::this_thread::sleep_for(20ms);
      } catch (const dlock::LockLostError&) {
        ++errors.lost;  // an unlock retried after its first attempt had run, or a lease that ended
        break;
      } catch (const dlock::LockError&) {
        ++errors.other;
        lock->unlockQuietly(name);
        break;
      }
    }
  }
  std::ofstream file(out);
  file << errors.connection << " " << errors.backend << " " << errors.lost << " " << errors.timeouts << " "
       << errors.other << "\n";
  for (const auto& entry : entries) file << entry.key << " " << entry.seen << " " << entry.fence << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 7 && std::string(argv[1]) == "--worker") {
      return worker(argv[2], std::atoi(argv[3]), std::atoll(argv[4]), std::atoi(argv[5]), argv[6]);
    }
    if (argc < 2) {
      std::fprintf(stderr, "usage: %s redis://host:port [workers] [acquisitions] [keys]\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const int workers = argc > 2 ? std::atoi(argv[2]) : 8;
    const long long total = argc > 3 ? std::atoll(argv[3]) : 1000000;
    const int keys = argc > 4 ? std::atoi(argv[4]) : 4;
    dlock::bench::RawRedis admin(uri);
    admin.command({"CLIENT", "SETNAME", "soak-data"});
    for (int k = 0; k < keys; ++k) admin.command({"DEL", "soak:counter:" + std::to_string(k)});

    char dirTemplate[] = "/tmp/dlock-soak-XXXXXX";
    const std::string dir = ::mkdtemp(dirTemplate);
    const auto start = std::chrono::steady_clock::now();
    std::vector<pid_t> pids;
    for (int w = 0; w < workers; ++w) {
      const std::string count = std::to_string(total / workers + (w < total % workers ? 1 : 0));
      pids.push_back(dlock::bench::spawnWorker(
          argv[0], {uri, std::to_string(w), count, std::to_string(keys), dir + "/worker-" + std::to_string(w)}));
    }

    // Faults, every 100-400 ms until the workers are done.
    std::atomic<bool> finished{false};
    std::map<std::string, long long> faults;
    std::thread injector([&] {
      dlock::bench::RawRedis chaos(uri);
      chaos.command({"CLIENT", "SETNAME", "soak-data"});
      std::mt19937 random(12345);
      while (!finished) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 300));
        if (finished) break;
        switch (random() % 4) {
          case 0:
          case 1: {  // kill the lock connections of the workers (not their data connections)
            const std::string clients = chaos.text({"CLIENT", "LIST"});
            std::size_t pos = 0;
            long long killed = 0;
            while ((pos = clients.find("id=", pos)) != std::string::npos) {
              const std::string id = clients.substr(pos + 3, clients.find(' ', pos) - pos - 3);
              const auto lineEnd = clients.find('\n', pos);
              const std::string line = clients.substr(pos, lineEnd - pos);
              if (line.find("name=soak-data") == std::string::npos && random() % 3 == 0) {
                chaos.command({"CLIENT", "KILL", "ID", id});
                ++killed;
              }
              pos = lineEnd;
            }
            faults["client_kill"] += killed;
            break;
          }
          case 2:
            chaos.command({"CLIENT", "PAUSE", std::to_string(50 + random() % 250), "ALL"});
            ++faults["client_pause"];
            break;
          default:
            chaos.command({"DEBUG", "SLEEP", "0.1"});
            ++faults["debug_sleep"];
            break;
        }
      }
    });
    const bool workersOk = dlock::bench::waitForWorkers(pids);
    finished = true;
    injector.join();
    const double seconds = dlock::bench::secondsSince(start);

    // Check: per key, the counter values seen are 0..n-1 exactly once, and tokens rise with them.
    Errors errors;
    std::map<int, std::map<long long, unsigned long long>> byKey;
    long long acquisitions = 0;
    long long violations = 0;
    for (int w = 0; w < workers; ++w) {
      std::ifstream in(dir + "/worker-" + std::to_string(w));
      long long connection = 0, backend = 0, lost = 0, timeouts = 0, other = 0;
      in >> connection >> backend >> lost >> timeouts >> other;
      errors.connection += connection;
      errors.backend += backend;
      errors.lost += lost;
      errors.timeouts += timeouts;
      errors.other += other;
      Entry entry{};
      while (in >> entry.key >> entry.seen >> entry.fence) {
        ++acquisitions;
        if (!byKey[entry.key].emplace(entry.seen, entry.fence).second) ++violations;  // two holders at once
      }
      std::remove((dir + "/worker-" + std::to_string(w)).c_str());
    }
    ::rmdir(dir.c_str());
    long long fenceOrderViolations = 0;
    for (const auto& [key, entries] : byKey) {
      const std::string counter = admin.text({"GET", "soak:counter:" + std::to_string(key)});
      if (std::atoll(counter.c_str()) != static_cast<long long>(entries.size())) ++violations;
      unsigned long long previous = 0;
      for (const auto& [seen, fence] : entries) {
        if (fence <= previous) ++fenceOrderViolations;
        previous = fence;
      }
    }
    dlock::bench::JsonLine("soak")
        .field("workers", static_cast<double>(workers))
        .field("keys", static_cast<double>(keys))
        .field("acquisitions", static_cast<double>(acquisitions))
        .field("seconds", seconds)
        .field("acquisitions_per_s", static_cast<double>(acquisitions) / seconds)
        .field("violations", static_cast<double>(violations))
        .field("fence_order_violations", static_cast<double>(fenceOrderViolations))
        .field("faults_client_kill", static_cast<double>(faults["client_kill"]))
        .field("faults_client_pause", static_cast<double>(faults["client_pause"]))
        .field("faults_debug_sleep", static_cast<double>(faults["debug_sleep"]))
        .field("errors_connection", static_cast<double>(errors.connection))
        .field("errors_backend", static_cast<double>(errors.backend))
        .field("errors_lock_lost", static_cast<double>(errors.lost))
        .field("errors_timeout", static_cast<double>(errors.timeouts))
        .field("errors_other", static_cast<double>(errors.other))
        .field("workers_ok", workersOk)
        .print();
    return violations == 0 && fenceOrderViolations == 0 && workersOk ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "soak: %s\n", error.what());
    return 1;
  }
}
