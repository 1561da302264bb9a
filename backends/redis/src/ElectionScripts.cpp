// SPDX-License-Identifier: Apache-2.0
#include "ElectionScripts.h"

#include <string>

#include "dlock/detail/Fork.h"

namespace dlock::detail {
namespace {

std::string proclaimSource(const char* publish) {
  return std::string(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local recorded = redis.call('HMGET', KEYS[2], 'term', 'seq')
local term, seq = ARGV[2], recorded[2] or '0'
if recorded[1] ~= term then
  local old = recorded[1]
  if old and (#old > #term or (#old == #term and old > term)) then return 0 end
  seq = string.format('%d', tonumber(seq) + 1)
end
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'term', term, 'seq', seq, 'value', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call(')lua") + publish + R"lua(', ARGV[5], term)
return 1
)lua";
}

constexpr const char* kReadSource = R"lua(
local owner = redis.call('GET', KEYS[1]) or ''
local record = redis.call('HMGET', KEYS[2], 'token', 'term', 'seq', 'value')
return {owner, redis.call('PTTL', KEYS[1]), record[1] or '', record[2] or '0', record[3] or '0', record[4] or ''}
)lua";

std::string announceSource(const char* publish) {
  return std::string("return redis.call('") + publish + "', ARGV[1], 'changed')\n";
}

}  // namespace

const Script& electionProclaimScript(bool sharded) {
  static const Script plain = makeBoundScript("electionProclaim", proclaimSource("PUBLISH"));
  static const Script cluster = makeBoundScript("shardedElectionProclaim", proclaimSource("SPUBLISH"));
  return sharded ? cluster : plain;
}

const Script& electionReadScript() {
  static const Script script = makeScript("electionRead", kReadSource);
  return script;
}

const Script& electionAnnounceScript(bool sharded) {
  static const Script plain = makeScript("electionAnnounce", announceSource("PUBLISH"));
  static const Script cluster = makeScript("shardedElectionAnnounce", announceSource("SPUBLISH"));
  return sharded ? cluster : plain;
}

namespace {

// Made while the library loads, as the other scripts are (Scripts.cpp).
const MadeAtLoad kElectionScriptsMadeAtLoad([] {
  for (const bool sharded : {false, true}) {
    (void)electionProclaimScript(sharded);
    (void)electionAnnounceScript(sharded);
  }
  (void)electionReadScript();
});

}  // namespace

}  // namespace dlock::detail
