// The scenarios of every topology. Each nemesis draws its choices (which client, which nodes,
// how long within bounds) from the run's seed, so `scripts/nemesis --seed S --scenario X`
// replays the same schedule.
#include <algorithm>
#include <chrono>
#include <thread>

#include "ClusterDeployment.h"
#include "Scenario.h"
#include "SentinelDeployment.h"

namespace dlock::nemesis {

using std::chrono::milliseconds;

milliseconds Run::between(milliseconds low, milliseconds high) {
  std::uniform_int_distribution<long long> draw(low.count(), high.count());
  return milliseconds(draw(random_));
}

std::size_t Run::pick(std::size_t count) {
  std::uniform_int_distribution<std::size_t> draw(0, count - 1);
  return draw(random_);
}

std::size_t Run::pickHolder() {
  const std::size_t first = pick(fleet_.size());
  const auto deadline = std::chrono::steady_clock::now() + timing_.holdMax * 5;
  while (std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < fleet_.size(); ++i) {
      const std::size_t slot = (first + i) % fleet_.size();
      if (fleet_.insideSection(slot)) return slot;
    }
    sleep(milliseconds(5));
  }
  return first;
}

void Run::sleep(milliseconds duration) { std::this_thread::sleep_for(duration); }

void Run::fault(const std::string& name, milliseconds length, const std::function<void()>& inject,
                const std::function<void()>& heal) {
  recorder_(name, true);
  inject();
  sleep(length);
  heal();
  recorder_(name, false);
}

namespace {

constexpr const char* kPauseExplained =
    "a holder stopped past its lease keeps running its critical section after the key expired; "
    "only the fencing token keeps its late write out";
constexpr const char* kPartitionExplained =
    "a holder cut off past its lease learns of the loss only when a renewal fails; until then its "
    "critical section overlaps the next holder's";
constexpr const char* kLostWritesExplained =
    "the server lost acknowledged writes (the lock key among them), so a second client took the key";
constexpr const char* kFailoverExplained =
    "the master acknowledged locks its replicas had not received when it died, so the promoted replica "
    "let a second client take them (asynchronous replication)";
constexpr const char* kClockExplained = "the server's clock jumped past the lease, so the key expired early";

using Deploy = std::function<std::unique_ptr<Deployment>(std::size_t)>;

Deploy single(Persistence persistence = Persistence::none, bool fakeClock = false) {
  return [=](std::size_t clients) {
    return std::make_unique<SingleDeployment>(clients, SingleDeployment::Options{persistence, fakeClock});
  };
}

std::unique_ptr<Deployment> redlock(std::size_t clients) { return std::make_unique<RedlockDeployment>(clients); }

void each(const std::vector<test::LinkProxy*>& links, const std::function<void(test::LinkProxy&)>& action) {
  for (test::LinkProxy* link : links) action(*link);
}

// Every client link of the deployment at once.
void eachLink(Run& run, const std::function<void(test::LinkProxy&)>& action) {
  each(run.deployment<Deployment>().allClientLinks(), action);
}

// One client cut off from every server while the others go on: its keys expire and are taken.
void partitionClient(Run& run) {
  const std::size_t slot = run.pickHolder();
  const auto links = run.deployment<Deployment>().clientLinks(slot);
  run.fault("partition " + run.fleet().id(slot), run.timing().faultLength,
            [&] { each(links, [](auto& link) { link.blackhole(); }); }, [&] { each(links, [](auto& link) { link.pass(); }); });
}

void latency(Run& run) {
  const milliseconds delay = run.between(run.timing().lease / 2, run.timing().lease * 3 / 4);
  run.fault("latency " + std::to_string(delay.count()) + " ms", run.timing().faultLength,
            [&] { eachLink(run, [&](auto& link) { link.delay(delay); }); },
            [&] { eachLink(run, [](auto& link) { link.pass(); }); });
}

void resets(Run& run) {
  run.fault("connection resets", run.timing().faultLength,
            [&] {
              const auto end = std::chrono::steady_clock::now() + run.timing().faultLength;
              while (std::chrono::steady_clock::now() < end) {
                eachLink(run, [](auto& link) { link.resetAll(); });
                run.sleep(run.between(milliseconds(50), milliseconds(300)));
              }
            },
            [] {});
}

void pauseClient(Run& run) {
  const std::size_t slot = run.pickHolder();
  run.fault("SIGSTOP " + run.fleet().id(slot), run.timing().faultLength, [&] { run.fleet().pause(slot); },
            [&] { run.fleet().resume(slot); });
}

void killClients(Run& run) {
  for (int i = 0; i < 2; ++i) {
    const std::size_t slot = run.pickHolder();
    run.fault("SIGKILL " + run.fleet().id(slot), milliseconds(0), [&] { run.fleet().kill(slot); }, [] {});
    run.sleep(run.between(milliseconds(300), milliseconds(900)));
  }
}

void restartServer(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  run.fault("server SIGKILL, restart", run.between(milliseconds(200), run.timing().lease),
            [&] { deployment.server().kill(); }, [&] { deployment.server().restart(); });
}

void clockJump(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  const auto jump = std::chrono::duration_cast<std::chrono::seconds>(run.timing().lease * 3) + std::chrono::seconds(1);
  run.fault("server clock +" + std::to_string(jump.count()) + " s", run.timing().faultLength,
            [&] { deployment.jumpClock(jump); }, [] {});
}

// Redlock: `count` distinct nodes, drawn from the seed.
std::vector<std::size_t> someNodes(Run& run, std::size_t count) {
  std::vector<std::size_t> nodes;
  while (nodes.size() < count) {
    const std::size_t node = run.pick(RedlockDeployment::kNodes);
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  return nodes;
}

std::string nodeNames(const std::vector<std::size_t>& nodes) {
  std::string names;
  for (std::size_t node : nodes) names += (names.empty() ? "" : ",") + std::to_string(node);
  return names;
}

void partitionTwoOfFive(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 2);
  std::vector<test::LinkProxy*> links;
  for (std::size_t node : nodes) {
    for (test::LinkProxy* link : deployment.nodeLinks(node)) links.push_back(link);
  }
  run.fault("partition nodes " + nodeNames(nodes), run.timing().faultLength,
            [&] { each(links, [](auto& link) { link.blackhole(); }); }, [&] { each(links, [](auto& link) { link.pass(); }); });
}

void threeOfFiveDown(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 3);
  run.fault("SIGKILL nodes " + nodeNames(nodes) + ", restart", run.timing().faultLength,
            [&] { for (std::size_t node : nodes) deployment.server(node).kill(); },
            [&] { for (std::size_t node : nodes) deployment.server(node).restart(); });
}

void restartOneWithoutPersistence(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const std::size_t node = run.pick(RedlockDeployment::kNodes);
  run.fault("SIGKILL node " + std::to_string(node) + ", restart empty", milliseconds(100),
            [&] { deployment.server(node).kill(); }, [&] { deployment.server(node).restart(); });
}

Deploy sentinel(std::size_t waitReplicas = 0) {
  return [=](std::size_t clients) {
    SentinelDeployment::Options options;
    options.waitReplicas = waitReplicas;
    return std::make_unique<SentinelDeployment>(clients, options);
  };
}

// How long the sentinels may take to promote a replica once the master is gone: down-after,
// agreement, election and promotion, on a busy machine.
constexpr milliseconds kPromotionBudget{15000};

// The master SIGKILLed; once the sentinels named another, it comes back as a replica.
void sentinelFailover(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  run.fault("master " + std::to_string(old) + " SIGKILL, failover", run.timing().faultLength,
            [&] { deployment.kill(old); },
            [&] {
              (void)deployment.waitForNewMaster(old, kPromotionBudget);
              deployment.restartAsReplica(old);
            });
}

// Replication held back by two leases while clients go on, then the master SIGKILLed: what it
// acknowledged in the window is on no replica when one is promoted.
void sentinelFailoverDelayedReplication(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  const milliseconds delay = run.timing().lease * 2;
  run.fault("replication +" + std::to_string(delay.count()) + " ms", delay / 2,
            [&] { deployment.delayReplication(delay); }, [] {});
  run.fault("master " + std::to_string(old) + " SIGKILL, failover", run.timing().faultLength,
            [&] { deployment.kill(old); },
            [&] {
              (void)deployment.waitForNewMaster(old, kPromotionBudget);
              deployment.passReplication();
              deployment.restartAsReplica(old);
            });
}

// The master cut off from clients, sentinels and replicas past down-after: the sentinels promote
// a replica; on heal the old master is demoted.
void sentinelPartitionMaster(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  test::LinkProxy& link = deployment.dataLink(old);
  run.fault("master " + std::to_string(old) + " partitioned", run.timing().faultLength + milliseconds(1500),
            [&] { link.blackhole(); },
            [&] {
              (void)deployment.waitForNewMaster(old, kPromotionBudget);  // the partition did what it is for
              link.pass();
            });
}

std::unique_ptr<Deployment> cluster(std::size_t clients) { return std::make_unique<ClusterDeployment>(clients); }

// The runner's first lock key (Nemesis.cpp names them nemesis-0, nemesis-1, ...).
constexpr const char* kFirstKey = "nemesis-0";

// The master serving the first key SIGKILLed; its replica takes over; the old master comes back.
void clusterFailover(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t old = deployment.ownerOf(slot);
  run.fault("master " + std::to_string(old) + " SIGKILL, failover", run.timing().faultLength,
            [&] { deployment.kill(old); },
            [&] {
              (void)deployment.waitForNewOwner(slot, old, kPromotionBudget);
              deployment.restart(old);
            });
}

// The first key's slot moved to another master while clients use it.
void clusterMigrateSlot(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t source = deployment.ownerOf(slot);
  std::vector<std::size_t> targets;
  for (std::size_t master : deployment.masters()) {
    if (master != source) targets.push_back(master);
  }
  const std::size_t target = targets.at(run.pick(targets.size()));
  run.fault("slot " + std::to_string(slot) + " migrated " + std::to_string(source) + " -> " + std::to_string(target),
            milliseconds(0), [&] { deployment.migrateSlot(slot, target, run.between(milliseconds(300), milliseconds(800))); },
            [] {});
}

// The first key's master cut off from clients and the bus past cluster-node-timeout: its replica
// takes over; healed, the old master rejoins as a replica.
void clusterPartitionMaster(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t old = deployment.ownerOf(slot);
  run.fault("master " + std::to_string(old) + " partitioned", run.timing().faultLength + milliseconds(1500),
            [&] { deployment.isolate(old); },
            [&] {
              (void)deployment.waitForNewOwner(slot, old, kPromotionBudget);  // the partition did what it is for
              deployment.rejoin(old);
            });
}

}  // namespace

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"single", "partition", "a client cut off from the server inside its section for 2.5 leases", kPartitionExplained, single(),
       partitionClient},
      {"single", "latency", "0.5-0.75 lease of latency on every client link", kPartitionExplained,
       single(), latency},
      {"single", "resets", "connection resets every 50-300 ms", "", single(), resets},
      {"single", "pause-client", "a client SIGSTOPped inside its section for 2.5 leases", kPauseExplained, single(),
       pauseClient},
      {"single", "kill-client", "two clients SIGKILLed inside their sections, replaced", "", single(), killClients},
      {"single", "restart-fsync-always", "server SIGKILLed and restarted, appendfsync always", "",
       single(Persistence::appendAlways), restartServer},
      {"single", "restart-fsync-everysec", "server SIGKILLed and restarted, appendfsync everysec",
       kLostWritesExplained, single(Persistence::appendEverySecond), restartServer},
      {"single", "restart-no-persistence", "server SIGKILLed and restarted empty", kLostWritesExplained,
       single(), restartServer},
      {"single", "clock-jump", "the server's wall clock jumps 3 leases ahead", kClockExplained,
       single(Persistence::none, true), clockJump},
      {"redlock", "partition-2-of-5", "two of five nodes partitioned for 2.5 leases", "", redlock,
       partitionTwoOfFive},
      {"redlock", "down-3-of-5", "three of five nodes SIGKILLed, restarted empty", kLostWritesExplained, redlock,
       threeOfFiveDown},
      {"redlock", "restart-1-no-persistence", "one node SIGKILLed and restarted empty at once", kLostWritesExplained,
       redlock, restartOneWithoutPersistence},
      {"redlock", "partition-client", "a client cut off from every node inside its section for 2.5 leases", kPartitionExplained,
       redlock, partitionClient},
      {"redlock", "pause-client", "a client SIGSTOPped inside its section for 2.5 leases", kPauseExplained, redlock, pauseClient},
      {"sentinel", "failover", "the master SIGKILLed, a replica promoted, the old master back as a replica",
       kFailoverExplained, sentinel(), sentinelFailover},
      {"sentinel", "failover-delayed-replication", "replication delayed 2 leases, then the master SIGKILLed",
       kFailoverExplained, sentinel(), sentinelFailoverDelayedReplication},
      {"sentinel", "failover-delayed-replication-wait",
       "as failover-delayed-replication, clients with wait_replicas=1", "", sentinel(1),
       sentinelFailoverDelayedReplication},
      {"sentinel", "partition-master", "the master cut off from everyone for 4 s, then healed",
       kFailoverExplained, sentinel(), sentinelPartitionMaster},
      {"cluster", "failover", "the first key's master SIGKILLed, its replica promoted, the old master back",
       kFailoverExplained, cluster, clusterFailover},
      {"cluster", "migrate-slot", "the first key's slot migrated live to another master", "", cluster,
       clusterMigrateSlot},
      {"cluster", "partition-master", "the first key's master cut off (clients and bus) for 4 s, then healed",
       kFailoverExplained, cluster, clusterPartitionMaster},
  };
  return all;
}

}  // namespace dlock::nemesis
