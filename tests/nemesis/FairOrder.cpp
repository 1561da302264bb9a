// SPDX-License-Identifier: Apache-2.0
#include "FairOrder.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "ServerRecord.h"

namespace dlock::nemesis {
namespace {

struct KeyQueue {
  std::deque<std::string> waiters;
  std::set<std::string> left;
  std::map<std::string, std::uint64_t> placeEnds;  // a waiter's place lease end (server ms), when seen
  std::string justUnqueued;  // taken off the head by the command before: the grant's heir
};

// Drops the waiters whose place lease had ended by `serverMs`: a place nobody renewed is gone from
// the server without a command (the queue's keys expire with the longest place), so the model must
// not count it ahead of a later grant.
void dropEndedPlaces(KeyQueue& queue, std::uint64_t serverMs) {
  auto& waiters = queue.waiters;
  waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                               [&](const std::string& waiter) {
                                 const auto end = queue.placeEnds.find(waiter);
                                 return end != queue.placeEnds.end() && end->second <= serverMs;
                               }),
                waiters.end());
}

std::string at(const Op& op) { return " at " + std::to_string(op.timeNs / 1'000'000) + " ms"; }

}  // namespace

FairOrderResult checkFairOrder(const std::vector<Op>& history) {
  // Each server's records in the order of its stream (the file's order: one writer per server).
  FairOrderResult result;
  std::map<std::pair<std::string, std::string>, KeyQueue> keys;  // by (server, key)
  const auto violation = [&](const std::string& what) {
    if (result.violations++ == 0) result.first = what;
  };
  for (const Op& op : history) {
    if (op.process != "server" || op.op.rfind("server-", 0) != 0) continue;
    const std::string node = serverStamp(op).node;
    if (op.op == "server-watch") {
      // What ran unseen on that server (before a connection) left its queues unknown: a model
      // queue holds only the waiters seen joining it, and a hand-off to an unseen one is taken
      // as the head's.
      for (auto& [where, queue] : keys) {
        if (where.first == node) queue = KeyQueue{};
      }
      continue;
    }
    KeyQueue& queue = keys[{node, op.key}];
    if (op.op == "server-place-lease") {
      queue.placeEnds[op.value] = op.token;
      continue;
    }
    const ServerStamp stamp = serverStamp(op);
    if (stamp.serverTimed && stamp.serverUs > 0) dropEndedPlaces(queue, static_cast<std::uint64_t>(stamp.serverUs / 1000));
    auto& waiters = queue.waiters;
    const auto position = std::find(waiters.begin(), waiters.end(), op.value);
    if (op.op == "server-enqueue") {
      if (position == waiters.end()) waiters.push_back(op.value);
      queue.left.erase(op.value);
      queue.justUnqueued.clear();
    } else if (op.op == "server-leave") {
      if (position != waiters.end()) {
        waiters.erase(position);
        queue.left.insert(op.value);
      }
      queue.justUnqueued.clear();
    } else if (op.op == "server-tombstone") {
      // The leave's first write: from here the waiter is gone, whether or not the leave's own
      // LREM follows (a leave that left the entry behind shows as a later grant to it).
      if (position != waiters.end()) queue.left.insert(op.value);
    } else if (op.op == "server-unqueue") {
      queue.justUnqueued = op.value;
      if (position == waiters.end()) continue;  // left already (a leave removes both), or unseen
      if (position != waiters.begin()) {
        violation("key '" + op.key + "': waiter " + op.value + " taken off the queue" + at(op) + " behind " +
                  std::to_string(position - waiters.begin()) + " waiter(s), the first " + waiters.front());
      }
      waiters.erase(position);
    } else if (op.op == "server-set") {
      ++result.grants;
      if (queue.left.count(op.value) > 0) {
        violation("key '" + op.key + "': granted" + at(op) + " to " + op.value + ", a waiter that had left");
      } else if (op.value != queue.justUnqueued && !waiters.empty()) {
        violation("key '" + op.key + "': " + op.value + " took the key" + at(op) + " past " +
                  std::to_string(waiters.size()) + " waiter(s), the first " + waiters.front());
      }
      queue.justUnqueued.clear();
    }
  }
  return result;
}

}  // namespace dlock::nemesis
