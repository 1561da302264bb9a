// LockCommands.h — the lock protocol on one connection, as every Redis backend speaks it: which
// script goes with which names and arguments, and how its reply is read. A backend only decides
// where a call goes (a pool, the current master, a slot's node) and what to do when it fails.
//
//   acquireOn     acquire script                → AcquireResult
//   releaseOn     release script (PUBLISH)      → ReleaseResult; our own subscriber not counted
//   extendOn      extend script                 → still ours?
//   extendManyOn  extendMany, one command per kChunk leases, one pipeline → one result per lease
//   raiseFenceOn  raiseFence script             → the counter now
//   inspectOn     inspect script                → LeaseInfo
//
// Each throws what the connection and the reply readers throw (ConnectionError, BackendError).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "Connection.h"
#include "KeyNames.h"
#include "Replies.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

class Subscriber;

AcquireResult acquireOn(Connection& connection, const KeyNames& names, std::string_view token,
                        std::chrono::milliseconds ttl, const ReplySource& where);

// The tries of one release in a backend's retry loop (ConnectionPool::run, a failover retry).
// A try cut off by a connection failure may have run on the server; a later try that finds the
// key gone may be seeing its work, and says so (ReleaseResult::inDoubt).
struct ReleaseTries {
  bool cutOff = false;  // a try failed with a ConnectionError after it may have been sent
};

// `own`, when given, is this operator's subscriber: its subscription is not a waiter elsewhere.
// `tries`, when given, is shared by every try of one release.
ReleaseResult releaseOn(Connection& connection, const KeyNames& names, std::string_view token,
                        const Subscriber* own, const ReplySource& where, ReleaseTries* tries = nullptr);

bool extendOn(Connection& connection, const KeyNames& names, std::string_view token, std::chrono::milliseconds ttl,
              const ReplySource& where);

std::vector<ExtendResult> extendManyOn(Connection& connection, std::string_view prefix,
                                       const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl,
                                       const ReplySource& where);

std::uint64_t raiseFenceOn(Connection& connection, const KeyNames& names, std::uint64_t atLeast,
                           const ReplySource& where);

LeaseInfo inspectOn(Connection& connection, const KeyNames& names, const ReplySource& where);

}  // namespace dlock::detail
