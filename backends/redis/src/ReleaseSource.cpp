// SPDX-License-Identifier: Apache-2.0
#include "ScriptSources.h"

namespace dlock::detail {

// PUBLISH (SPUBLISH on a cluster) before DEL: a script is not rolled back, so a publish the ACL
// (or a cluster slot check) refuses must fail before the key is gone. The order is invisible
// otherwise: subscribers get the message only after the whole script has run.
// The release record: a release whose reply is lost (a connection dies under it) is sent again,
// and that retry must tell "my release ran" from "my lease was lost and the key taken or freed"
// (a restart without persistence, a failover). So the release leaves a record under its token
// for as long as the lease had left (at least ARGV[4] ms, the client's retry window), and a
// retry that finds the key no longer ours answers from it; no record means not released by us.
// Redisson's unlock leaves such a latch per request id for the same reason.
// The record is named in ARGV, as the channel is, and written with pcall: during a slot migration
// Redis refuses a script whose declared keys are partly missing (TRYAGAIN) and an undeclared key
// the node no longer has (ASK), and a full server refuses SET (OOM). The release itself must go
// on in all three; only the record is missed, and a retry without one reports a loss, never a
// success it cannot prove.
// A cancel (ARGV[5] = '1': undoing an acquire whose outcome is unknown) that finds the key not
// ours leaves the record as '0', a tombstone: the acquire script refuses a token that has one, so
// an acquire still queued behind the cancel on a busy server (its connection timed out, the cancel
// went on another) cannot take the key afterwards for a client that gave it up. Only a released
// record ('1') is evidence of a release.
// The owner record (the last ARGV, KeyNames::owner) goes with the key in one DEL; named in ARGV,
// it may be refused during a migration as the record may, and then the key goes alone.
// Waiters: a release wakes one waiting process of this version, the longest registered in the
// key's waiter registry (ARGV[6], read in the same MGET as the key: a key nobody waits for costs
// no more calls) not woken yet (a woken one keeps its place until it gets the key: Scripts.cpp),
// on its own channel; the release channel still gets its '1' for waiters of
// dlock 0.2, which listen there (a waiter of this version does not, so that message wakes no
// herd). Both publishes come before the DEL, for the reason above; the registry's is a pcall.
// A refused MGET (an undeclared registry during a migration) reads the key alone: nobody is
// woken, and the waiters' rechecks find the key.
std::string releaseSource(const char* publish) {
  return waiterRegistryPrelude(publish) + R"lua(
local got = redis.pcall('MGET', KEYS[1], ARGV[6])
local holder, waiting = false, false
if type(got) == 'table' and not got.err then
  holder, waiting = got[1], got[2]
else
  holder = redis.call('GET', KEYS[1])
end
if holder == ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  local notified = redis.call(')lua" + std::string(publish) + R"lua(', ARGV[2], '1')
  if waiting then notified = notified + wakeOne(ARGV[6], waiting, ARGV[2], serverMillis()) end
  redis.pcall('SET', ARGV[3], '1', 'PX', math.max(left, tonumber(ARGV[4])))
  local gone = redis.pcall('DEL', KEYS[1], ARGV[#ARGV])
  if type(gone) == 'table' and gone.err then redis.call('DEL', KEYS[1]) end
  return {1, notified}
end
if redis.pcall('GET', ARGV[3]) == '1' then return {2, 0} end
if ARGV[5] == '1' then redis.pcall('SET', ARGV[3], '0', 'PX', ARGV[4]) end
return {0, 0}
)lua";
}

}  // namespace dlock::detail
