// SPDX-License-Identifier: Apache-2.0
#include "WaiterFaults.h"

#include <algorithm>
#include <thread>

#include "redis/src/KeyNames.h"
#include "RedisClient.h"

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

// W's and C's holds: long enough for W to come back inside C's; their acquires wait this long.
constexpr milliseconds kWaiterHold{3000};
constexpr milliseconds kWaiterWait{10000};
constexpr milliseconds kWaiterFault{2500};

// How many waiters the server shows for the first key: a queue's length, or the processes in the
// key's waiter registry (the default lock: each waiting process's try registers it, `listener=expiry;`).
long long serverWaiters(Run& run, WaitQueue queue) {
  const std::string address = run.deployment<Deployment>().dataAddresses().front();
  const auto colon = address.rfind(':');
  test::RedisClient client(address.substr(0, colon), std::stoi(address.substr(colon + 1)), milliseconds(500));
  const detail::KeyNames names("dlock:", run.fleet().firstKey(), false);
  if (queue == WaitQueue::fair) return client.command({"LLEN", names.fairQueue()}).integer;
  if (queue == WaitQueue::readWrite) return client.command({"LLEN", names.rwQueue()}).integer;
  if (queue == WaitQueue::semaphore) return client.command({"LLEN", names.semaphore("queue")}).integer;
  const std::string registry = client.command({"GET", names.waiters()}).str;
  return static_cast<long long>(std::count(registry.begin(), registry.end(), ';'));
}

// Whether the client in `slot` is inside an acquire of the first key it was asked for.
bool acquiring(Run& run, std::size_t slot) {
  Fleet& fleet = run.fleet();
  bool inside = false;
  for (const Op& op : fleet.history()) {
    if (op.process == fleet.id(slot) && op.op == "acquire" && op.key == fleet.firstKey() &&
        op.timeNs >= fleet.holdRequestedNs(slot)) {
      inside = op.kind == Kind::Invoke;
    }
  }
  return inside;
}

// Waits until the client in `slot` waits for the first key and the server shows `waiters`.
bool awaitWaiting(Run& run, std::size_t slot, long long waiters, WaitQueue queue) {
  const auto deadline = std::chrono::steady_clock::now() + run.timing().acquireTimeout * 4 + run.timing().holdMax * 2;
  while (std::chrono::steady_clock::now() < deadline) {
    if (acquiring(run, slot) && serverWaiters(run, queue) >= waiters) return true;
    run.sleep(milliseconds(10));
  }
  return false;
}

std::string faultName(WaiterFault fault, const std::string& process) {
  switch (fault) {
    case WaiterFault::pause: return "SIGSTOP " + process + " (waiter)";
    case WaiterFault::partition: return "partition " + process + " (waiter)";
    case WaiterFault::kill: return "SIGKILL " + process + " (waiter)";
  }
  return "";
}

}  // namespace

void waiterAroundHandOff(Run& run, WaiterFault fault, WaitQueue queue) {
  Fleet& fleet = run.fleet();
  const auto holder = run.holdLong(milliseconds(0), kWaiterWait * 2);
  if (!holder) return;  // the runner retries the cycle
  const std::size_t w = (holder->slot + 1) % fleet.size();
  const std::size_t c = (holder->slot + 2) % fleet.size();
  const Target waiter{w, fleet.id(w), fleet.firstKey()};
  const auto endAll = [&] {
    for (const std::size_t slot : {holder->slot, w, c}) fleet.endHold(slot);
  };
  // W first, then C behind it (on the fair lock, other clients may queue between them).
  // On a semaphore the holder P takes every permit and W and C ask for one each: P's release
  // frees room for both, and admits both.
  const std::uint32_t permits = queue == WaitQueue::semaphore ? 1 : 0;
  fleet.requestHold(w, milliseconds(0), kWaiterHold, kWaiterWait, permits);
  bool waiting = awaitWaiting(run, w, 1, queue);
  if (waiting) {
    fleet.requestHold(c, milliseconds(0), kWaiterHold, kWaiterWait, permits);
    waiting = awaitWaiting(run, c, 2, queue);
  }
  if (!waiting) {
    run.missed("the waiters were not both waiting for the key");
    return endAll();
  }
  const auto links = run.deployment<Deployment>().clientLinks(w);
  run.fault(
      faultName(fault, waiter.process), fault == WaiterFault::kill ? milliseconds(0) : kWaiterFault,
      [&] {
        switch (fault) {
          case WaiterFault::pause: fleet.pause(w); break;
          case WaiterFault::partition:
            for (auto* link : links) link->blackhole();
            break;
          case WaiterFault::kill:
            fleet.endHold(w);  // its replacement must not take the request up
            fleet.kill(w);
            break;
        }
        fleet.endHold(holder->slot);  // P releases: the hand-off W is not there for
      },
      [&] {
        if (fault == WaiterFault::pause) fleet.resume(w);
        if (fault == WaiterFault::partition) {
          for (auto* link : links) link->pass();
        }
      },
      &waiter);
  // W's acquire ends (with the key once C let go, or at its timeout) within C's hold and its wait.
  if (fault != WaiterFault::kill) (void)fleet.waitHolding(w, kWaiterHold + kWaiterWait);
  endAll();
}

void waiterMixed(Run& run, WaitQueue queue) {
  const WaiterFault faults[] = {WaiterFault::pause, WaiterFault::partition, WaiterFault::kill};
  waiterAroundHandOff(run, faults[run.pick(3)], queue);
}

void staleReleaseNearExpiry(Run& run) {
  Fleet& fleet = run.fleet();
  const auto holder = run.holdLong(milliseconds(0), run.timing().faultLength * 4);
  if (!holder) return;
  constexpr milliseconds kOtherLease{1500};
  constexpr milliseconds kLeft{250};
  run.fault(
      "SIGSTOP " + holder->process, milliseconds(0), [&] { fleet.pause(holder->slot); },
      [&] {
        // Its key expires unrenewed; another client takes it for a fixed lease.
        const std::size_t other = (holder->slot + 1) % fleet.size();
        fleet.requestHold(other, kOtherLease, kOtherLease * 2, run.timing().lease * 4);
        const bool taken = fleet.waitHolding(other, run.timing().lease * 6);
        if (!taken) run.missed("no other client took the paused holder's key");
        if (taken) run.sleep(kOtherLease - kLeft);
        // A third client asks for the key now, with ~250 ms of the other's lease left: only a lock
        // that takes a held key it thinks nearly free gets it before the other's lease ends.
        const std::size_t third = (holder->slot + 2) % fleet.size();
        if (taken && third != holder->slot && third != other) {
          fleet.requestHold(third, kOtherLease, kOtherLease, kLeft * 4);
        }
        fleet.endHold(holder->slot);  // released at once when it resumes
        fleet.resume(holder->slot);
        if (taken) run.sleep(kLeft * 2);
        fleet.endHold(other);
        if (taken && third != holder->slot && third != other) fleet.endHold(third);
      },
      &*holder);
}

}  // namespace dlock::nemesis
