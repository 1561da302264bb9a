// SPDX-License-Identifier: Apache-2.0
#include "AwaiterFaults.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlock/IConditionOperator.h>
#include <dlock/dlock.h>

#include "Deployment.h"

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

// The awaiter's fault (past its 2 s waiter lease), and how long P's and C's acquires may wait.
constexpr milliseconds kAwaiterFault{2500};
constexpr milliseconds kRequestWait{10000};
// The bounded buffer's hold that outlives its fixed lease, and the condition its awaiter waits on.
constexpr milliseconds kStaleLease{1000};
constexpr milliseconds kStaleHold{1600};
constexpr const char* kAwaited = "notEmpty";
constexpr std::uint32_t kProducer = 1;  // a --control request's role field (Client.cpp)
constexpr std::uint32_t kAwaitOnRelease = 3;

// The slot whose client is inside an await of the first key's `name` and whose token the server
// lists on that condition (the client's `joined` record carries it); nothing within `budget`.
std::optional<std::size_t> findAwaiter(Run& run, dlock::IConditionOperator& conditions, const std::string& name,
                                       milliseconds budget) {
  Fleet& fleet = run.fleet();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> listed;
    try {
      for (const auto& waiter : conditions.inspectCondition(fleet.firstKey(), name).waiters) listed.push_back(waiter.token);
    } catch (const dlock::LockError&) {  // asked again next time
    }
    if (!listed.empty()) {
      std::map<std::string, std::string> joined;  // process → token, while inside the await
      for (const Op& op : fleet.history()) {
        if (op.op == "await" && op.key == fleet.firstKey()) joined.erase(op.process);
        if (op.op == "joined" && op.key == fleet.firstKey() && op.value == name) joined[op.process] = op.message;
      }
      for (std::size_t slot = 0; slot < fleet.size(); ++slot) {
        const auto found = joined.find(fleet.id(slot));
        if (found != joined.end() && std::find(listed.begin(), listed.end(), found->second) != listed.end()) return slot;
      }
    }
    run.sleep(milliseconds(20));
  }
  return std::nullopt;
}

std::string faultName(WaiterFault fault, const std::string& process) {
  const char* what = fault == WaiterFault::pause ? "SIGSTOP " : fault == WaiterFault::partition ? "partition " : "SIGKILL ";
  return what + process + " (waiter)";
}

}  // namespace

void awaiterAroundSignal(Run& run, WaiterFault fault) {
  Fleet& fleet = run.fleet();
  const std::shared_ptr<dlock::IOperator> backend = dlock::connect(run.deployment<Deployment>().lockUri(0));
  auto* conditions = dynamic_cast<dlock::IConditionOperator*>(backend.get());
  if (conditions == nullptr) throw std::logic_error("awaiterAroundSignal: the backend has no conditions");
  const auto w = findAwaiter(run, *conditions, kAwaited, run.timing().recoveryBound);
  if (!w) return run.missed("no client was awaiting the first key's notEmpty");
  const std::size_t p = (*w + 1) % fleet.size();
  const std::size_t c = (*w + 2) % fleet.size();
  const Target waiter{*w, fleet.id(*w), fleet.firstKey()};
  const auto links = run.deployment<Deployment>().clientLinks(*w);
  const auto startedNs = monotonicNs();
  run.fault(
      faultName(fault, waiter.process), fault == WaiterFault::kill ? milliseconds(0) : kAwaiterFault,
      [&] {
        switch (fault) {
          case WaiterFault::pause: fleet.pause(*w); break;
          case WaiterFault::partition:
            for (auto* link : links) link->blackhole();
            break;
          case WaiterFault::kill: fleet.kill(*w); break;
        }
        fleet.requestHold(p, kStaleLease, kStaleHold, kRequestWait, kProducer);
        if (fleet.waitHolding(p, kRequestWait)) fleet.requestHold(c, milliseconds(0), milliseconds(300), kRequestWait, kProducer);
      },
      [&] {
        if (fault == WaiterFault::pause) fleet.resume(*w);
        if (fault == WaiterFault::partition) {
          for (auto* link : links) link->pass();
        }
      },
      &waiter);
  // P's signal comes at the end of its hold; C's hold is short.
  const auto waited = std::chrono::duration_cast<milliseconds>(std::chrono::nanoseconds(monotonicNs() - startedNs));
  if (waited < kStaleHold * 2) run.sleep(kStaleHold * 2 - waited);
  fleet.endHold(p);
  fleet.endHold(c);
}

void awaiterMixed(Run& run) {
  const WaiterFault faults[] = {WaiterFault::pause, WaiterFault::partition, WaiterFault::kill};
  awaiterAroundSignal(run, faults[run.pick(3)]);
}

void awaitInServerPause(Run& run) {
  Fleet& fleet = run.fleet();
  auto& deployment = run.deployment<SingleDeployment>();
  const milliseconds budget = run.timing().acquireTimeout * 4 + run.timing().holdMax * 2;
  const milliseconds max = run.timing().faultLength + run.timing().lease * 2;
  const std::size_t first = run.pick(fleet.size());
  for (std::size_t i = 0; i < 2; ++i) {
    const std::size_t slot = (first + i) % fleet.size();
    fleet.requestHold(slot, milliseconds(0), max, milliseconds(0), kAwaitOnRelease);
    if (!fleet.waitHolding(slot, budget)) continue;
    const Target holder{slot, fleet.id(slot), fleet.firstKey()};
    run.fault(
        "server SIGSTOP (await in flight)", run.timing().faultLength,
        [&] {
          deployment.server().pause();
          fleet.endHold(slot);  // the holder awaits now, into the pause
        },
        [&] { deployment.server().resume(); }, &holder);
    return;
  }
  run.missed("no client got inside a hold of the first key");
}

}  // namespace dlock::nemesis
