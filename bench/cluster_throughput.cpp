// SPDX-License-Identifier: Apache-2.0
// cluster_throughput — lock throughput over many keys on a Redis Cluster of 1 master and of 3
// masters, against the physical limit measured in the same run: a raw hiredis loop making the
// same round trips (SET NX PX, then EVALSHA of a compare-and-delete) to each key's master.
//
//   cluster_throughput [--seconds S] [--rounds R] [--threads T] [--keys K] [--uri1 URI] [--uri3 URI]
//
// The raw loop and dlock alternate for R rounds of S/R seconds each, and the median round of each
// is reported, so both see the same background load.
// Each thread takes and releases its own share of the K keys in turn (no contention: this
// measures routing and round trips, not waiting). Without --uri1/--uri3 the program starts the
// clusters itself with scripts/cluster-start (no replicas) in a temporary directory and stops
// them with scripts/cluster-stop. One JSON line per result on stdout:
//   {"bench":"cluster_throughput","masters":3,"client":"dlock","threads":4,"keys":1000,
//    "rounds":3,"seconds":0.67,"cycles":…,"cycles_per_sec":…,"p50_us":…,"p99_us":…[,"vs_raw":…]}
// A cycle is one lock and one unlock; p50/p99 are of whole cycles.
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "RawRedis.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/cluster/ClusterOperator.h"
#include "dlock/uri.h"

namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Settings {
  double seconds = 2.0;
  int rounds = 3;
  int threads = 4;
  int keys = 1000;
  std::string uri1;
  std::string uri3;
};

struct Result {
  std::uint64_t cycles = 0;
  double seconds = 0;
  double p50us = 0;
  double p99us = 0;
  [[nodiscard]] double rate() const { return seconds > 0 ? static_cast<double>(cycles) / seconds : 0; }
};

// Runs `argv` and returns its standard output; throws when it fails.
std::string run(std::vector<std::string> argv) {
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::dup2(pipeFds[1], STDOUT_FILENO);
    ::close(pipeFds[0]);
    ::close(pipeFds[1]);
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(pipeFds[1]);
  std::string out;
  char buffer[512];
  ssize_t got = 0;
  while ((got = ::read(pipeFds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(got));
  ::close(pipeFds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(argv[0] + " failed");
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// A cluster started by scripts/cluster-start, stopped (by pid) on destruction.
class ScriptCluster {
 public:
  explicit ScriptCluster(int masters) {
    char pattern[] = "/tmp/dlock-bench-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    try {
      uri_ = run({std::string(DLOCK_SOURCE_DIR) + "/scripts/cluster-start", dir_, "--masters", std::to_string(masters),
                  "--replicas", "0"});
    } catch (...) {
      stop();
      throw;
    }
  }
  ScriptCluster(const ScriptCluster&) = delete;
  ScriptCluster& operator=(const ScriptCluster&) = delete;
  ~ScriptCluster() { stop(); }
  [[nodiscard]] const std::string& uri() const { return uri_; }

 private:
  void stop() noexcept {
    try {
      (void)run({std::string(DLOCK_SOURCE_DIR) + "/scripts/cluster-stop", dir_});
    } catch (...) {
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string dir_;
  std::string uri_;
};

// Every master of the cluster, and the index of each slot's master among them, from CLUSTER SLOTS
// on the first seed. A node reports an empty host for "the address you reached me at".
struct SlotMap {
  std::vector<dlock::Endpoint> masters;
  std::vector<std::size_t> master;  // kClusterSlots entries
};

SlotMap slotMap(const std::string& uri) {
  const dlock::Endpoint seed = dlock::parseUri(uri).hosts.at(0);
  dlock::bench::RawRedis node(seed);
  const dlock::bench::Reply reply = node.ok({"CLUSTER", "SLOTS"});
  SlotMap map;
  map.master.assign(dlock::kClusterSlots, 0);
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    const redisReply* address = range->element[2];
    dlock::Endpoint master{std::string(address->element[0]->str, address->element[0]->len),
                          static_cast<int>(address->element[1]->integer)};
    if (master.host.empty()) master.host = seed.host;
    std::size_t index = 0;
    while (index < map.masters.size() &&
           (map.masters[index].host != master.host || map.masters[index].port != master.port)) {
      ++index;
    }
    if (index == map.masters.size()) map.masters.push_back(master);
    for (long long slot = range->element[0]->integer; slot <= range->element[1]->integer; ++slot) {
      map.master[static_cast<std::size_t>(slot)] = index;
    }
  }
  return map;
}

// The same compare-and-delete as dlock's cluster release, for the raw loop.
constexpr const char* kRelease =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) "
    "return {1, redis.call('SPUBLISH', ARGV[2], '1')} end return {0, 0}";

// Runs `cycle(thread, n)` on every thread for the configured time; `cycle` returns false on failure.
template <class Cycle>
Result measure(const Settings& settings, Cycle cycle) {
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(settings.threads));
  std::vector<std::thread> threads;
  const auto start = Steady::now();
  for (int t = 0; t < settings.threads; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = latencies[static_cast<std::size_t>(t)];
      for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        const auto begin = Steady::now();
        if (!cycle(t, n)) {
          failed = true;
          return;
        }
        mine.push_back(std::chrono::duration<double, std::micro>(Steady::now() - begin).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(settings.seconds / settings.rounds));
  stop = true;
  for (auto& thread : threads) thread.join();
  if (failed) throw std::runtime_error("a cycle failed");
  Result result;
  result.seconds = dlock::bench::secondsSince(start);
  std::vector<double> all;
  for (const auto& mine : latencies) all.insert(all.end(), mine.begin(), mine.end());
  result.cycles = all.size();
  result.p50us = dlock::bench::percentile(all, 50);
  result.p99us = dlock::bench::percentile(all, 99);
  return result;
}

std::string keyName(const Settings& settings, int thread, std::uint64_t n) {
  const int perThread = std::max(1, settings.keys / settings.threads);
  return "bench:" + std::to_string(thread * perThread + static_cast<int>(n % static_cast<std::uint64_t>(perThread)));
}

Result measureDlock(const Settings& settings, const std::string& uri) {
  dlock::ClusterOptions options;
  for (const auto& seed : dlock::parseUri(uri).hosts) options.seeds.push_back(dlock::ClusterSeed{seed.host, seed.port});
  options.pool.size = static_cast<std::size_t>(settings.threads);
  dlock::ClusterOperator backend(options);
  return measure(settings, [&](int thread, std::uint64_t n) {
    const std::string key = keyName(settings, thread, n);
    const std::string token = "token-" + std::to_string(thread) + "-" + std::to_string(n);
    try {
      if (!backend.lock(key, token, 10s).acquired) return false;
      return backend.unlock(key, token).released;
    } catch (const dlock::LockError& error) {
      std::fprintf(stderr, "dlock: %s\n", error.what());
      return false;
    }
  });
}

Result measureRaw(const Settings& settings, const std::string& uri) {
  const SlotMap map = slotMap(uri);
  std::string sha;
  for (const auto& master : map.masters) sha = dlock::bench::RawRedis(master).text({"SCRIPT", "LOAD", kRelease});
  // One connection per thread and master, as a pool would give.
  std::vector<std::vector<std::unique_ptr<dlock::bench::RawRedis>>> connections(
      static_cast<std::size_t>(settings.threads));
  for (auto& mine : connections) mine.resize(map.masters.size());
  return measure(settings, [&](int thread, std::uint64_t n) {
    const auto names = dlock::clusterKeyNames("dlock:", keyName(settings, thread, n));
    const std::size_t master = map.master[names.slot];
    auto& connection = connections[static_cast<std::size_t>(thread)][master];
    try {
      if (!connection) connection = std::make_unique<dlock::bench::RawRedis>(map.masters[master]);
      const std::string token = "token-" + std::to_string(thread) + "-" + std::to_string(n);
      if (connection->ok({"SET", names.lock, token, "NX", "PX", "10000"})->type != REDIS_REPLY_STATUS) return false;
      const auto released = connection->ok({"EVALSHA", sha, "1", names.lock, token, names.channel});
      return released->type == REDIS_REPLY_ARRAY && released->element[0]->integer == 1;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "raw: %s\n", error.what());
      return false;
    }
  });
}

void print(const Settings& settings, int masters, const char* client, const Result& result, double vsRaw) {
  dlock::bench::JsonLine line("cluster_throughput");
  line.field("masters", static_cast<double>(masters))
      .field("client", std::string(client))
      .field("threads", static_cast<double>(settings.threads))
      .field("keys", static_cast<double>(settings.keys))
      .field("rounds", static_cast<double>(settings.rounds))
      .field("seconds", result.seconds)
      .field("cycles", static_cast<double>(result.cycles))
      .field("cycles_per_sec", result.rate())
      .field("p50_us", result.p50us)
      .field("p99_us", result.p99us);
  if (vsRaw > 0) line.field("vs_raw", vsRaw);
  line.print();
}

Result median(std::vector<Result> rounds) {
  std::sort(rounds.begin(), rounds.end(), [](const Result& a, const Result& b) { return a.rate() < b.rate(); });
  return rounds[rounds.size() / 2];
}

void bench(const Settings& settings, int masters, const std::string& uri) {
  std::vector<Result> raw;
  std::vector<Result> lock;
  for (int round = 0; round < settings.rounds; ++round) {
    raw.push_back(measureRaw(settings, uri));
    lock.push_back(measureDlock(settings, uri));
  }
  const Result rawMedian = median(raw);
  const Result lockMedian = median(lock);
  print(settings, masters, "raw", rawMedian, 0);
  print(settings, masters, "dlock", lockMedian, rawMedian.rate() > 0 ? lockMedian.rate() / rawMedian.rate() : 0);
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--seconds" && hasValue) {
      settings.seconds = std::atof(argv[++i]);
    } else if (arg == "--rounds" && hasValue) {
      settings.rounds = std::atoi(argv[++i]);
    } else if (arg == "--threads" && hasValue) {
      settings.threads = std::atoi(argv[++i]);
    } else if (arg == "--keys" && hasValue) {
      settings.keys = std::atoi(argv[++i]);
    } else if (arg == "--uri1" && hasValue) {
      settings.uri1 = argv[++i];
    } else if (arg == "--uri3" && hasValue) {
      settings.uri3 = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--rounds R] [--threads T] [--keys K] [--uri1 URI] [--uri3 URI]\n",
                   argv[0]);
      return 2;
    }
  }
  if (settings.seconds <= 0 || settings.rounds <= 0 || settings.threads <= 0 || settings.keys < settings.threads) {
    std::fprintf(stderr, "cluster_throughput: need seconds > 0, rounds > 0, threads > 0 and keys >= threads\n");
    return 2;
  }
  try {
    for (const int masters : {1, 3}) {
      const std::string& given = masters == 1 ? settings.uri1 : settings.uri3;
      if (!given.empty()) {
        bench(settings, masters, given);
      } else {
        const ScriptCluster cluster(masters);
        bench(settings, masters, cluster.uri());
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cluster_throughput: %s\n", error.what());
    return 1;
  }
  return 0;
}
