// SPDX-License-Identifier: Apache-2.0
// RedisOperator's leader records (IElectionOperator): the calls of ElectionScripts.h and the
// watch of an election's change channel.
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

#include "ElectionScripts.h"
#include "Errors.h"
#include "KeyNames.h"
#include "QueueReplies.h"
#include "RedisOperatorOptions.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

using std::chrono::milliseconds;

namespace detail {
namespace {

// The channel's watch in slices, so that interrupt() ends a wait within one (the subscriber's
// waits have no interrupt of their own).
class RedisLeaderWatch final : public ILeaderWatch {
 public:
  explicit RedisLeaderWatch(std::unique_ptr<IReleaseWatch> watch) : watch_(std::move(watch)) {}

  bool waitForChange(milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!interrupted_.load()) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= milliseconds(0)) return false;
      if (watch_->waitForRelease(std::min(left, kSlice))) return true;
    }
    return true;
  }

  void interrupt() noexcept override { interrupted_.store(true); }

 private:
  static constexpr milliseconds kSlice{50};
  const std::unique_ptr<IReleaseWatch> watch_;
  std::atomic<bool> interrupted_{false};
};

LeaderRecord readLeaderReply(const redisReply& reply, const std::string& where) {
  const redisReply& array = arrayOf(reply, 6, where);
  const std::string_view owner = textOf(*array.element[0]);
  const long long ttl = integerAt(array, 1, where);
  const std::string_view token = textOf(*array.element[2]);
  LeaderRecord record;
  record.term = decimalAt(array, 3, kMaxFencingToken, where);
  record.sequence = decimalAt(array, 4, kMaxFencingToken, where);
  record.value = std::string(textOf(*array.element[5]));
  record.held = !owner.empty() && owner == token && ttl > 0;
  if (record.held) record.remaining = milliseconds(ttl);
  return record;
}

}  // namespace
}  // namespace detail

using namespace detail;

bool RedisOperator::proclaim(std::string_view key, std::string_view token, std::uint64_t term,
                             std::string_view value) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string record = names.leaderRecord();
  const std::string channel = names.leaderChannel();
  const std::string termText = std::to_string(term);
  const std::string recordTtl = std::to_string(options.fenceTtl.count());
  Call call("proclaim", key, options.retryBudget);
  bool written = false;
  runScriptCall(topology, call, names.slot(), electionProclaimScript(topology.sharded()), {names.lock(), record},
                {token, termText, value, recordTtl, channel}, [&](const redisReply& reply, const std::string& node) {
                  const std::string where = describeCall("proclaim", key, node);
                  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where);
                  if (reply.type != REDIS_REPLY_INTEGER || (reply.integer != 0 && reply.integer != 1)) {
                    unexpectedReply(where, "expected 0 or 1");
                  }
                  written = reply.integer == 1;
                });
  return written;
}

LeaderRecord RedisOperator::readLeader(std::string_view key) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string record = names.leaderRecord();
  Call call("readLeader", key, options.retryBudget);
  LeaderRecord leader;
  runScriptCall(topology, call, names.slot(), electionReadScript(), {names.lock(), record}, {},
                [&](const redisReply& reply, const std::string& node) {
                  leader = readLeaderReply(reply, describeCall("readLeader", key, node));
                });
  return leader;
}

void RedisOperator::announce(std::string_view key) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string channel = names.leaderChannel();
  Call call("announce", key, options.retryBudget);
  runScriptCall(topology, call, names.slot(), electionAnnounceScript(topology.sharded()), {names.lock()}, {channel},
                [&](const redisReply& reply, const std::string& node) {
                  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, describeCall("announce", key, node));
                });
}

std::unique_ptr<ILeaderWatch> RedisOperator::watchLeader(std::string_view key) {
  const std::shared_ptr<Topology>& topology = sharedTopology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology->sharded());
  return std::make_unique<RedisLeaderWatch>(
      watchChannel(topology, options.retryBudget, names.slot(), names.leaderChannel()));
}

}  // namespace dlock
