// Scenario.h — one fault-test scenario: a topology, and a nemesis that injects faults into it on
// a schedule drawn from the run's seed. Scenarios are listed by scenarios(); the runner deploys the
// topology, starts the workload, runs the nemesis, heals, lets the workload recover, and checks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "Deployment.h"
#include "Fleet.h"

namespace dlock::nemesis {

// The times every scenario is built from; faults are sized against the lease.
struct Timing {
  std::chrono::milliseconds lease{1000};
  std::chrono::milliseconds acquireTimeout{1000};
  std::chrono::milliseconds holdMin{2};
  std::chrono::milliseconds holdMax{400};
  std::chrono::milliseconds warmup{1500};
  std::chrono::milliseconds faultLength{2500};  // a partition or pause longer than the lease
  // After a fault heals every live client acquires again within this (check 4); the run goes on
  // this long after the last fault so that the check can see it.
  std::chrono::milliseconds recoveryBound{8000};
};

// What a nemesis works with. fault() records the window the checker and the plot shade.
class Run {
 public:
  using FaultRecorder = std::function<void(const std::string& name, bool start)>;

  Run(Deployment& deployment, Fleet& fleet, std::uint64_t seed, Timing timing, FaultRecorder recorder)
      : deployment_(deployment), fleet_(fleet), random_(seed), timing_(timing), recorder_(std::move(recorder)) {}

  template <typename T>
  [[nodiscard]] T& deployment() {
    return dynamic_cast<T&>(deployment_);
  }
  [[nodiscard]] Fleet& fleet() { return fleet_; }
  [[nodiscard]] const Timing& timing() const { return timing_; }
  // A uniform draw from [low, high].
  std::chrono::milliseconds between(std::chrono::milliseconds low, std::chrono::milliseconds high);
  std::size_t pick(std::size_t count);
  // A client inside its critical section, waited for up to a few holds (a fault that finds the
  // holder mid-section is the one that tests the lock); a random one if none was seen in time.
  std::size_t pickHolder();
  void sleep(std::chrono::milliseconds duration);

  // Records the fault's start, runs `inject`, waits `length`, runs `heal` and records the end.
  void fault(const std::string& name, std::chrono::milliseconds length, const std::function<void()>& inject,
             const std::function<void()>& heal);

 private:
  Deployment& deployment_;
  Fleet& fleet_;
  std::mt19937_64 random_;
  Timing timing_;
  FaultRecorder recorder_;
};

struct Scenario {
  std::string topology;  // single, redlock, sentinel, cluster
  std::string name;
  std::string summary;  // what the nemesis does
  // Why critical sections may overlap here, where Redis's model makes no promise (a pause or a
  // partition longer than the lease, lost writes); empty where the lock must keep them apart.
  std::string overlapsExplained;
  std::function<std::unique_ptr<Deployment>(std::size_t clients)> deploy;
  std::function<void(Run&)> nemesis;
};

[[nodiscard]] const std::vector<Scenario>& scenarios();

}  // namespace dlock::nemesis
