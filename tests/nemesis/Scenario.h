// SPDX-License-Identifier: Apache-2.0
// Scenario.h — one fault-test scenario: a topology, and a nemesis that injects faults into it on
// a schedule drawn from the run's seed. Scenarios are listed by scenarios(); the runner deploys the
// topology, starts the workload, runs the nemesis, heals, lets the workload recover, and checks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "Deployment.h"
#include "FaultHits.h"
#include "Fleet.h"

namespace dlock::nemesis {

// The times every scenario is built from; faults are sized against the lease.
struct Timing {
  std::chrono::milliseconds lease{1000};
  std::chrono::milliseconds acquireTimeout{1000};
  std::chrono::milliseconds holdMin{2};
  std::chrono::milliseconds holdMax{400};
  std::chrono::milliseconds warmup{1500};  // at most, until every client has acquired once
  std::chrono::milliseconds faultLength{2500};  // a partition or pause longer than the lease
  // After a fault heals every live client acquires again within this (check 4); the run goes on
  // this long after the last fault so that the check can see it.
  std::chrono::milliseconds recoveryBound{8000};
};

// The client a fault aims at, inside a long hold of `key` the nemesis asked it for.
struct Target {
  std::size_t slot = 0;
  std::string process;  // "c3"
  std::string key;
};

// What a nemesis works with. fault() records the window the checker and the plot shade, with its
// target; sample() is called inside every fault window and after its heal (check 6 during the run).
class Run {
 public:
  using FaultRecorder = std::function<void(const std::string& name, bool start, const Target* target)>;
  using Sampler = std::function<void()>;

  Run(Deployment& deployment, Fleet& fleet, std::uint64_t seed, Timing timing, FaultRecorder recorder, Sampler sample)
      : deployment_(deployment), fleet_(fleet), random_(seed), timing_(timing), recorder_(std::move(recorder)),
        sample_(std::move(sample)) {}

  template <typename T>
  [[nodiscard]] T& deployment() {
    return dynamic_cast<T&>(deployment_);
  }
  [[nodiscard]] Fleet& fleet() { return fleet_; }
  [[nodiscard]] const Timing& timing() const { return timing_; }
  // A uniform draw from [low, high].
  std::chrono::milliseconds between(std::chrono::milliseconds low, std::chrono::milliseconds high);
  std::size_t pick(std::size_t count);
  // Asks a client (drawn from the seed; the next one if it cannot) for a hold of the first key
  // with a fixed `lease` (0: the watchdog's) of up to `max`, and waits until it is inside it.
  // Nothing when no client got there in time: the runner then retries the cycle.
  std::optional<Target> holdLong(std::chrono::milliseconds lease, std::chrono::milliseconds max);
  // As above, the request's PERMITS field `role` (Client.cpp: a read-write client's mode, a
  // semaphore client's permits, a condition client's role).
  std::optional<Target> holdLong(std::chrono::milliseconds lease, std::chrono::milliseconds max, std::uint32_t role);
  // Waits for a moment of `target`'s watchdog-renewed hold drawn from the seed: its start, after
  // its first renewal, after its third, or as the renewal after its first is due (the fault then
  // meets that renewal in flight). The next fault's name says which. `renewed`: never its start,
  // so that the fault meets a lease the watchdog has renewed (a renewal's lease is then judged).
  void awaitDrawnMoment(const Target& target, bool renewed = false);
  // Ends the hold (the client releases) once another client took its key or `budget` passed:
  // a hold that outlives the recovery meets the next holder.
  void endHoldAfterTaken(const Target& target, std::chrono::milliseconds budget);
  // Whether another client acquired the target's key after `sinceNs` (monotonic), waiting up to `budget`.
  bool waitTaken(const Target& target, std::int64_t sinceNs, std::chrono::milliseconds budget);
  void sleep(std::chrono::milliseconds duration);
  // Records a cycle whose fault never struck (no client got where it was to be hit), and why.
  void missed(const std::string& why);
  void onMiss(std::function<void(const std::string& why)> recorder) { missRecorder_ = std::move(recorder); }

  // Records the fault's start (with its target), runs `inject`, waits `length`, samples, runs
  // `heal`, samples and records the end.
  void fault(const std::string& name, std::chrono::milliseconds length, const std::function<void()>& inject,
             const std::function<void()>& heal, const Target* target = nullptr);

 private:
  Deployment& deployment_;
  Fleet& fleet_;
  std::mt19937_64 random_;
  Timing timing_;
  FaultRecorder recorder_;
  Sampler sample_;
  std::function<void(const std::string& why)> missRecorder_;
  std::string moment_;  // the next fault's moment of its hold, for its name ("" when not drawn)
};

struct Scenario {
  std::string topology;  // single, redlock, sentinel, cluster
  std::string name;
  std::string summary;  // what the nemesis does
  // The cause that lets critical sections overlap here (lost writes, a failover without replica
  // acknowledgement, a clock jump, a paused process); empty where the lock must keep them apart
  // (checks 2 and 8).
  std::string overlapsExplained;
  FaultExpectation expect;  // what each fault means to do to its holder (check 9)
  std::function<std::unique_ptr<Deployment>(std::size_t clients)> deploy;
  std::function<void(Run&)> nemesis;
  // The clients run the fair lock; check 10 replays its queue from the servers' record (FairOrder.h).
  bool fair = false;
  // The cause that makes fencing tokens go back here; empty where they must keep rising (check 3).
  std::string tokensBackExplained{};
  // What the clients run: "lock" (the ILock), "rw" (read and write holds), "sem" (permits of
  // kSemaphoreCapacity), checked by SharedChecks.h, or "cond" (the bounded buffer of
  // kBufferCapacity, over the lock and its Conditions), checked by ConditionChecks.h, or "elect"
  // (candidates for the first key's leadership, dlock::Election), checked by ElectionChecks.h.
  std::string primitive = "lock";
  // A "cond" scenario whose fault is aimed at an await itself (judged by check 7): a run where no
  // await met a signal after it leaves check 10 out, saying so, instead of failing as vacuous.
  bool signalsOptional = false;
  // The lock's clients wait with acquireAsync, a quarter of their drawn acquires cancelled.
  bool async = false;
};

// The semaphore scenarios' capacity. A client asks for one permit, or a third of the time (and
// whenever the nemesis asks it for a hold) for all of them.
inline constexpr std::uint32_t kSemaphoreCapacity = 3;
// The condition scenarios' bounded buffer: items per key.
inline constexpr std::uint32_t kBufferCapacity = 8;

[[nodiscard]] const std::vector<Scenario>& scenarios();

}  // namespace dlock::nemesis
