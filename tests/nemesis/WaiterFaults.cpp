// SPDX-License-Identifier: Apache-2.0
#include "WaiterFaults.h"

#include <algorithm>
#include <sstream>
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
test::RedisClient firstServer(Run& run) {
  const std::string address = run.deployment<Deployment>().dataAddresses().front();
  const auto colon = address.rfind(':');
  return test::RedisClient(address.substr(0, colon), std::stoi(address.substr(colon + 1)), milliseconds(500));
}

long long serverWaiters(Run& run, WaitQueue queue) {
  test::RedisClient client = firstServer(run);
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

// How long the first key's lease (the exclusive lock's, the writer's, or the permits' last to end)
// has to run on the server; 0 or less when none does.
long long leaseLeft(test::RedisClient& client, const detail::KeyNames& names, WaitQueue queue) {
  if (queue == WaitQueue::semaphore) {
    const auto last = client.command({"ZRANGE", names.semaphore("deadlines"), "-1", "-1", "WITHSCORES"});
    if (last.elements.size() < 2) return 0;
    const auto time = client.command({"TIME"});
    const long long nowMs = std::stoll(time.elements[0].str) * 1000 + std::stoll(time.elements[1].str) / 1000;
    return std::stoll(last.elements[1].str) - nowMs;
  }
  return client.command({"PTTL", queue == WaitQueue::readWrite ? names.rwWriter() : names.lock()}).integer;
}

// Waits until the first key's lease has at most `left` to run on the server: false when it has
// none (ended, or never set) by then or `budget` passed.
bool untilLeaseLeft(Run& run, WaitQueue queue, milliseconds left, milliseconds budget) {
  test::RedisClient client = firstServer(run);
  const detail::KeyNames names("dlock:", run.fleet().firstKey(), false);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    const long long remaining = leaseLeft(client, names, queue);
    if (remaining <= 0) return false;
    if (remaining <= left.count()) return true;
    std::this_thread::sleep_for(std::min(milliseconds(remaining - left.count()), milliseconds(5)));
  }
  return false;
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

void cancellerCutOff(Run& run, WaitQueue queue) {
  Fleet& fleet = run.fleet();
  const auto holder = run.holdLong(milliseconds(0), kWaiterWait * 2);
  if (!holder) return;  // the runner retries the cycle
  const std::size_t w = (holder->slot + 1) % fleet.size();
  const Target canceller{w, fleet.id(w), fleet.firstKey()};
  const auto endBoth = [&] {
    fleet.endHold(holder->slot);
    fleet.endHold(w);
  };
  fleet.requestHold(w, milliseconds(0), kWaiterHold, kWaiterWait);
  if (!awaitWaiting(run, w, 1, queue)) {
    run.missed("the canceller was not waiting for the key");
    return endBoth();
  }
  const milliseconds cancelAfter = run.between(milliseconds(0), milliseconds(100));
  const auto links = run.deployment<Deployment>().clientLinks(w);
  run.fault(
      "partition " + canceller.process + " (canceller)", kWaiterFault,
      [&] {
        for (auto* link : links) link->blackhole();
        fleet.endHold(holder->slot);  // P releases; W, cut off, does not hear of it
        // W's next try (a script call) goes into the cut once its pause ends; the cancel follows it.
        const bool inFlight = std::any_of(links.begin(), links.end(), [&](auto* link) {
          return link->waitForBlackholed("EVAL", kWaiterFault / 2);
        });
        if (!inFlight) run.missed("the canceller sent no try into the cut");
        run.sleep(cancelAfter);
        fleet.requestCancel(w);
      },
      [&] {
        for (auto* link : links) link->pass();
      },
      &canceller);
  endBoth();
}

void staleReleaseNearExpiry(Run& run, WaitQueue queue) {
  Fleet& fleet = run.fleet();
  const auto holder = run.holdLong(milliseconds(0), run.timing().faultLength * 4);
  if (!holder) return;
  constexpr milliseconds kOtherLease{1500};
  constexpr milliseconds kLeft{250};
  constexpr milliseconds kThirdTry{100};  // the third client's acquire timeout: a try every ~100 ms
  run.fault(
      "SIGSTOP " + holder->process, milliseconds(0), [&] { fleet.pause(holder->slot); },
      [&] {
        // Its key expires unrenewed; another client takes it for a fixed lease.
        const std::size_t other = (holder->slot + 1) % fleet.size();
        const std::size_t third = (holder->slot + 2) % fleet.size();
        const bool hasThird = third != holder->slot && third != other;
        fleet.requestHold(other, kOtherLease, kOtherLease * 2, run.timing().lease * 4);
        bool taken = fleet.waitHolding(other, run.timing().lease * 6);
        if (!taken) run.missed("no other client took the paused holder's key");
        // A third client asks for the key over and over, one short acquire after another, until
        // it has it: one of its tries lands in the other's last 300 ms, where only a lock that takes
        // a held key it thinks nearly free gets it. (One long acquire would try once early, then
        // sleep to the lease's end; and a client busy in an acquire of its own takes a request up
        // only after it, so the request goes in at once.)
        if (taken && hasThird) fleet.requestHold(third, kOtherLease, kOtherLease, kThirdTry);
        // The stale holder releases with ~250 ms of the other's lease left, as the server shows it
        // (its PTTL, not a sleep: a client's report of the hold comes late on a busy machine).
        if (taken && !untilLeaseLeft(run, queue, kLeft, kOtherLease * 2)) {
          run.missed("the other's lease ended before the stale holder could release");
          taken = false;
        }
        fleet.endHold(holder->slot);  // released at once when it resumes
        fleet.resume(holder->slot);
        if (taken) run.sleep(kLeft * 2);
        fleet.endHold(other);
        if (hasThird) fleet.endHold(third);
      },
      &*holder);
}

// Client.cpp's request fields for a read-write client: a write that downgrades when it ends.
constexpr std::uint32_t kRequestWrite = 0;
constexpr std::uint32_t kRequestDowngrade = 3;

// Whether the client in `slot` completed a downgrade of the first key after `sinceNs`, waiting up
// to `budget`.
bool awaitDowngraded(Run& run, std::size_t slot, std::int64_t sinceNs, milliseconds budget) {
  Fleet& fleet = run.fleet();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const Op& op : fleet.history()) {
      if (op.process == fleet.id(slot) && op.op == "downgrade" && op.kind == Kind::Ok && op.key == fleet.firstKey() &&
          op.timeNs > sinceNs) {
        return true;
      }
    }
    run.sleep(milliseconds(2));
  }
  return false;
}

// Whether the client in `slot`, waiting for the first key since it was asked, is at the head of
// the queue by its last attempt's answer ("queued SENT 1 …"), waiting up to `budget`: the head
// is whom a release or a downgrade admits.
bool awaitHead(Run& run, std::size_t slot, milliseconds budget) {
  Fleet& fleet = run.fleet();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string last;
    for (const Op& op : fleet.history()) {
      if (op.process == fleet.id(slot) && op.op == "attempt" && op.key == fleet.firstKey() &&
          op.timeNs >= fleet.holdRequestedNs(slot)) {
        last = op.value;
      }
    }
    std::istringstream words(last);
    std::string outcome;
    std::int64_t sentNs = 0;
    std::uint32_t position = 0;
    if (words >> outcome >> sentNs >> position && outcome == "queued" && position == 1) return true;
    run.sleep(milliseconds(10));
  }
  return false;
}

void downgradeBesideWaiter(Run& run) {
  Fleet& fleet = run.fleet();
  const auto holder = run.holdLong(milliseconds(0), kWaiterWait * 2, kRequestDowngrade);
  if (!holder) return;
  const std::size_t w = (holder->slot + 1) % fleet.size();
  fleet.requestHold(w, milliseconds(0), kWaiterHold, kWaiterWait, kRequestWrite);
  if (!awaitWaiting(run, w, 1, WaitQueue::readWrite) || !awaitHead(run, w, run.timing().lease * 2)) {
    run.missed("no writer waited for the key at the head of its queue");
    fleet.endHold(holder->slot);
    return fleet.endHold(w);
  }
  const auto links = run.deployment<Deployment>().clientLinks(holder->slot);
  bool downgraded = false;
  run.fault(
      "partition " + holder->process + " (downgraded, " + fleet.id(w) + " waiting)", run.timing().faultLength,
      [&] {
        const std::int64_t since = monotonicNs();
        fleet.endHold(holder->slot);
        downgraded = awaitDowngraded(run, holder->slot, since, run.timing().lease);
        for (auto* link : links) link->blackhole();
      },
      [&] {
        for (auto* link : links) link->pass();
      },
      &*holder);
  if (!downgraded) run.missed("the holder did not downgrade");
  (void)fleet.waitHolding(w, kWaiterHold + kWaiterWait);
  fleet.endHold(w);
}

}  // namespace dlock::nemesis
