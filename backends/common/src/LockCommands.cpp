#include "LockCommands.h"

#include <algorithm>
#include <string>

#include "Scripts.h"
#include "Subscriber.h"
#include "dlock/LockError.h"

namespace dlock::detail {

AcquireResult acquireOn(Connection& connection, const KeyNames& names, std::string_view token,
                        std::chrono::milliseconds ttl, const ReplySource& where) {
  const std::string fence = names.fence();
  const std::string ttlText = std::to_string(ttl.count());
  const ReplyPtr reply = runScript(connection, acquireScript(), {names.lock, fence}, {token, ttlText});
  return readAcquireReply(*reply, where);
}

ReleaseResult releaseOn(Connection& connection, const KeyNames& names, std::string_view token,
                        const Subscriber* own, const ReplySource& where, ReleaseTries* tries) {
  const std::string channel = names.channel();
  ReplyPtr reply;
  try {
    reply = runScript(connection, releaseScript(), {names.lock}, {token, channel});
  } catch (const ConnectionError&) {
    if (tries != nullptr) tries->cutOff = true;  // I/O failed: the script may have run
    throw;
  }
  // An error reply (READONLY, NOPERM...) means the script did not delete the key: not cut off.
  ReleaseResult result = readReleaseReply(*reply, where);
  if (result.notified > 0 && own != nullptr && own->subscribed(channel)) --result.notified;
  result.inDoubt = !result.released && tries != nullptr && tries->cutOff;
  return result;
}

bool extendOn(Connection& connection, const KeyNames& names, std::string_view token, std::chrono::milliseconds ttl,
              const ReplySource& where) {
  const std::string ttlText = std::to_string(ttl.count());
  const ReplyPtr reply = runScript(connection, extendScript(), {names.lock}, {token, ttlText});
  return readFlagReply(*reply, where);
}

std::vector<ExtendResult> extendManyOn(Connection& connection, std::string_view prefix,
                                       const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl,
                                       const ReplySource& where) {
  // One extendMany per chunk, every chunk in one pipeline: the watchdog's renewals cost one round
  // trip and, up to kChunk leases, one command, however many keys are held.
  constexpr std::size_t kChunk = 5000;
  if (leases.empty()) return {};
  const std::string ttlText = std::to_string(ttl.count());
  std::vector<std::string> lockKeys;
  lockKeys.reserve(leases.size());
  for (const auto& lease : leases) lockKeys.push_back(keyNames(prefix, lease.key).lock);
  std::vector<std::pair<Argv, Argv>> calls;
  for (std::size_t start = 0; start < leases.size(); start += kChunk) {
    const std::size_t end = std::min(leases.size(), start + kChunk);
    Argv keys(lockKeys.begin() + static_cast<std::ptrdiff_t>(start), lockKeys.begin() + static_cast<std::ptrdiff_t>(end));
    Argv args = {ttlText};
    for (std::size_t i = start; i < end; ++i) args.push_back(leases[i].token);
    calls.emplace_back(std::move(keys), std::move(args));
  }
  const auto replies = runScriptPipelined(connection, extendManyScript(), calls);
  std::vector<ExtendResult> extended;
  extended.reserve(leases.size());
  for (std::size_t chunk = 0; chunk < replies.size(); ++chunk) {
    for (const bool flag : readFlagsReply(*replies[chunk], calls[chunk].first.size(), where)) {
      extended.push_back(ExtendResult{flag, {}});  // one server: the whole ttl
    }
  }
  return extended;
}

std::uint64_t raiseFenceOn(Connection& connection, const KeyNames& names, std::uint64_t atLeast,
                           const ReplySource& where) {
  const std::string wanted = std::to_string(atLeast);
  const ReplyPtr reply = runScript(connection, raiseFenceScript(), {names.fence()}, {wanted});
  return readCountReply(*reply, where);
}

LeaseInfo inspectOn(Connection& connection, const KeyNames& names, const ReplySource& where) {
  const ReplyPtr reply = runScript(connection, inspectScript(), {names.lock, names.fence()}, {});
  return readInspectReply(*reply, where);
}

}  // namespace dlock::detail
