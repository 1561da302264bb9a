// SPDX-License-Identifier: Apache-2.0
// dlock_failover_trials — how often a Sentinel failover loses a lock that the master acknowledged,
// without and with wait_replicas=1. Each trial, on a SentinelDeployment reused across trials:
// the replication links are delayed (a seeded draw), a client acquires a fresh key through the
// public API, the master is SIGKILLed as soon as the acquire returns, the sentinels promote a
// replica, and a second client tries the key. The lock is lost when the second client gets it while
// the first's lease is still running. The killed node then comes back as a replica and the set is
// waited for until healthy. The two modes run side by side, each on its own deployment.
// --lag one delays only one replica (drawn each trial): the other acknowledges, so wait_replicas=1
// lets acquisitions through, and a lock is lost only if the sentinels promote the lagging one.
//
//   dlock_failover_trials [--trials N] [--seed S] [--out FILE.md] [--delay-min-ms A] [--delay-max-ms B]
//                         [--lag all|one]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <dlock/dlock.h>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "SentinelDeployment.h"

namespace {

using dlock::nemesis::SentinelDeployment;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

// Longer than a failover takes (down-after, agreement, election, promotion), so that a second
// client that gets the key while it runs proves the key was lost rather than expired.
constexpr milliseconds kLease{10000};
constexpr milliseconds kPromotionBudget{20000};
constexpr milliseconds kHealthyBudget{30000};

struct Arguments {
  int trials = 200;
  std::uint64_t seed = 1;
  std::string out;
  milliseconds delayMin{0};
  milliseconds delayMax{4000};  // past the ~2.3 s a promotion takes, so some writes miss it
  bool lagOne = false;
};

struct Tally {
  int trials = 0;
  int acquired = 0;  // the first client got the lock (with wait_replicas: its replicas acknowledged)
  int refused = 0;   // its acquire failed (a ConnectionError: too few acknowledgements)
  int lost = 0;      // the second client got the key inside the first's lease
  int aborted = 0;   // the deployment did not come back in time: the trial counts for nothing
};

std::shared_ptr<dlock::ILock> lockOn(const std::string& uri, milliseconds lease) {
  dlock::LockBuilder builder;
  builder.backend(dlock::connect(uri));
  builder.leaseTime(lease);
  return builder.build();
}

// The second client: tries the key once the sentinels point it at a master that answers; false
// once the first's lease ended without it (the key survived the failover).
bool takenWithinLease(const std::string& uri, const std::string& key, Steady::time_point leaseEnd) {
  const auto second = lockOn(uri, 1000ms);
  while (Steady::now() < leaseEnd) {
    try {
      const bool got = second->tryLock(key, 0ms);
      const bool inLease = Steady::now() < leaseEnd;
      if (got) second->unlock(key);
      return got && inLease;
    } catch (const dlock::ConnectionError&) {
      std::this_thread::sleep_for(20ms);  // the failover is not through for this client yet
    }
  }
  return false;
}

// `lagging`: which replica (0 or 1, in node order) alone is delayed; none: both.
void trial(SentinelDeployment& deployment, const std::string& key, milliseconds delay, std::optional<std::size_t> lagging,
           Tally& tally) {
  ++tally.trials;
  const std::string uri = deployment.lockUri(0);
  const std::size_t master = deployment.master();
  if (lagging) {
    std::vector<std::size_t> replicas;
    for (std::size_t node = 0; node < SentinelDeployment::kDataNodes; ++node) {
      if (node != master) replicas.push_back(node);
    }
    deployment.delayReplicationOf(replicas.at(*lagging), delay);
  } else {
    deployment.delayReplication(delay);
  }
  const auto first = lockOn(uri, kLease);
  const auto start = Steady::now();  // the lease runs at most from here
  bool acquired = false;
  try {
    acquired = first->tryLock(key, 0ms);
  } catch (const dlock::ConnectionError&) {
    ++tally.refused;
  }
  if (!acquired) {
    deployment.passReplication();
    return;
  }
  ++tally.acquired;
  deployment.kill(master);
  (void)deployment.waitForNewMaster(master, kPromotionBudget);
  deployment.passReplication();
  if (takenWithinLease(uri, key, start + kLease)) ++tally.lost;
  deployment.restartAsReplica(master);
  deployment.waitHealthy(kHealthyBudget);
}

void runMode(std::size_t waitReplicas, const Arguments& args, Tally& tally) {
  SentinelDeployment::Options options;
  options.waitReplicas = waitReplicas;
  auto deployment = std::make_unique<SentinelDeployment>(1, options);
  std::mt19937_64 random(args.seed * 31 + waitReplicas);
  std::uniform_int_distribution<long long> draw(args.delayMin.count(), args.delayMax.count());
  for (int n = 0; n < args.trials; ++n) {
    const std::string key = "trial-" + std::to_string(args.seed) + "-" + std::to_string(waitReplicas) + "-" + std::to_string(n);
    try {
      const milliseconds delay(draw(random));
      const std::optional<std::size_t> lagging =
          args.lagOne ? std::optional<std::size_t>(random() % 2) : std::nullopt;
      trial(*deployment, key, delay, lagging, tally);
    } catch (const std::exception& error) {
      ++tally.aborted;
      std::fprintf(stderr, "[trials] wait_replicas=%zu trial %d aborted: %s\n", waitReplicas, n, error.what());
      try {
        deployment->heal();
      } catch (const std::exception&) {
        deployment = std::make_unique<SentinelDeployment>(1, options);  // start over on a fresh set
      }
    }
    if ((n + 1) % 20 == 0) {
      std::printf("[trials] wait_replicas=%zu: %d trials, %d acquired, %d lost\n", waitReplicas, n + 1, tally.acquired,
                  tally.lost);
      std::fflush(stdout);
    }
  }
}

Arguments parse(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const std::string value = argv[i + 1];
    if (name == "--trials") {
      args.trials = std::stoi(value);
    } else if (name == "--seed") {
      args.seed = std::stoull(value);
    } else if (name == "--out") {
      args.out = value;
    } else if (name == "--delay-min-ms") {
      args.delayMin = milliseconds(std::stoll(value));
    } else if (name == "--delay-max-ms") {
      args.delayMax = milliseconds(std::stoll(value));
    } else if (name == "--lag") {
      if (value != "all" && value != "one") throw std::invalid_argument("--lag is all or one");
      args.lagOne = value == "one";
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  if (argc % 2 == 0) throw std::invalid_argument(std::string(argv[argc - 1]) + " needs a value");
  if (args.trials < 1 || args.delayMin > args.delayMax) throw std::invalid_argument("bad --trials or delay range");
  return args;
}

// The 95% Wilson score interval of `hits` in `n`, in percent: honest at 0 of 3 as at 131 of 200.
std::string wilson(int hits, int n) {
  if (n == 0) return "n/a";
  const double z = 1.96;
  const double p = static_cast<double>(hits) / n;
  const double size = static_cast<double>(n);
  const double centre = p + z * z / (2 * size);
  const double half = z * std::sqrt(p * (1 - p) / size + z * z / (4 * size * size));
  const double scale = 1 + z * z / size;
  char text[64];
  std::snprintf(text, sizeof text, "%.1f%% (%.1f%%-%.1f%%)", 100 * p, 100 * (centre - half) / scale,
                100 * (centre + half) / scale);
  return text;
}

// Losses are counted among the locks acquired: a refused acquire cannot be lost.
std::string row(const char* mode, const Tally& tally) {
  return std::string("| ") + mode + " | " + std::to_string(tally.trials) + " | " + std::to_string(tally.acquired) + " | " +
         std::to_string(tally.refused) + " | " + std::to_string(tally.lost) + " | " + std::to_string(tally.aborted) + " | " +
         wilson(tally.lost, tally.acquired) + " |";
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_failover_trials: %s (see the top of FailoverTrials.cpp)\n", error.what());
    return 2;
  }
  Tally without;
  Tally with;
  try {
    std::thread other([&] { runMode(1, args, with); });
    runMode(0, args, without);
    other.join();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_failover_trials: could not set up: %s\n", error.what());
    return 2;
  }
  const std::string table =
      "Sentinel failover right after an acquire, replication of " + std::string(args.lagOne ? "one replica" : "both replicas") +
      " delayed " + std::to_string(args.delayMin.count()) + "-" +
      std::to_string(args.delayMax.count()) + " ms (seed " + std::to_string(args.seed) + ", lease " +
      std::to_string(kLease.count()) + " ms)\n\n| mode | trials | acquired | refused | lost | aborted "
      "| lost of acquired (95% Wilson) |\n|---|---|---|---|---|---|---|\n" +
      row("without wait_replicas", without) + "\n" + row("wait_replicas=1", with) + "\n";
  std::printf("\n%s", table.c_str());
  std::printf("trials %d, lost without %d, lost with %d\n", without.trials, without.lost, with.lost);
  if (!args.out.empty()) std::ofstream(args.out) << table;
  return 0;
}
