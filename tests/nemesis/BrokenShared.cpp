// SPDX-License-Identifier: Apache-2.0
#include "BrokenShared.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "redis/src/KeyNames.h"
#include "RawServer.h"
#include "redis/src/SemaphoreScripts.h"

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

constexpr const char* kReadersPastWriter = "rw-readers-past-writer";
constexpr const char* kReadWriteReleaseNoOwnerCheck = "rw-release-no-owner-check";
constexpr const char* kSemaphoreReleaseNoOwnerCheck = "sem-release-no-owner-check";
constexpr const char* kClientClock = "sem-client-clock";
constexpr const char* kWakesOne = "sem-wakes-one";
constexpr const char* kPrefix = "dlock:";
// How far ahead of the server's clock the client-clock variant's clock runs.
constexpr milliseconds kClientAhead{10'000};

// A read granted whenever no writer holds and a reader's lease lives, whatever waits: Redisson's
// read script. KEYS: writer, readers, fence; ARGV: token, ttl-ms. "taken FENCE" or "no".
constexpr const char* kAdmitReader = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then return 'no' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%.0f', now), '+inf') == 0 then return 'no' end
redis.call('ZADD', KEYS[2], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 'taken ' .. (redis.call('GET', KEYS[3]) or '0')
)lua";

std::string replaceOnce(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("BrokenShared: the release script changed; cannot find: " + from);
  return text.replace(at, from.size(), to);
}

// The library's release script with its admission loop stopped after one waiter in calls that
// admit for others (a release, an extend), and its replies as text.
std::string wakeOneRelease() {
  std::string source = detail::semaphoreReleaseScript(false).source;
  source = replaceOnce(source, "      admitted = admitted + 1\n",
                       "      admitted = admitted + 1\n      if keep == nil then s.admit = false end\n");
  source = replaceOnce(source, "return finish(s, {1, admit(s)})", "return 'released ' .. finish(s, {1, admit(s)})[2]");
  source = replaceOnce(source, "return finish(s, {2, 0})", "finish(s, {2, 0}) return 'earlier'");
  return replaceOnce(source, "return finish(s, {0, 0})", "finish(s, {0, 0}) return 'not-ours'");
}

class BrokenReadWrite final : public IReadWriteOperator {
 public:
  BrokenReadWrite(std::shared_ptr<IReadWriteOperator> inner, std::string variant, const std::string& uri)
      : inner_(std::move(inner)), variant_(std::move(variant)) {
    if (variant_ == kReadersPastWriter) raw_ = std::make_unique<RawServer>(uri);
  }
  [[nodiscard]] std::string readWriteUnsupported() const override { return inner_->readWriteUnsupported(); }

 private:
  FairAcquireResult doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode, milliseconds ttl,
                              milliseconds waiterLease) override {
    if (raw_ && mode == ReadWriteMode::Read) {
      const detail::KeyNames names(kPrefix, name, false);
      const auto reply = raw_->evalText(kAdmitReader, {names.rwWriter(), names.rwReaders(), names.rwFence()},
                                    {std::string(token), std::to_string(ttl.count())});
      if (reply && reply->rfind("taken ", 0) == 0) {
        FairAcquireResult taken;
        taken.acquired = true;
        taken.fencingToken = std::stoull(reply->substr(6));
        return taken;
      }
    }
    return mode == ReadWriteMode::Read ? inner_->acquireRead(name, token, ttl, waiterLease)
                                       : inner_->acquireWrite(name, token, ttl, waiterLease);
  }
  ReleaseResult doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) override {
    ReleaseResult result = mode == ReadWriteMode::Read ? inner_->releaseRead(name, token) : inner_->releaseWrite(name, token);
    if (result.released || variant_ != kReadWriteReleaseNoOwnerCheck) return result;
    const ReadWriteInfo info = inner_->inspectReadWrite(name);
    if (info.writer) {
      (void)inner_->releaseWrite(name, info.writer->token);
    } else {
      for (const auto& reader : info.readers) (void)inner_->releaseRead(name, reader.token);
    }
    result.released = true;
    return result;
  }
  bool doDowngrade(std::string_view name, std::string_view token, milliseconds ttl) override {
    return inner_->downgrade(name, token, ttl);
  }
  FairAcquireResult doTryUpgrade(std::string_view name, std::string_view token, milliseconds ttl) override {
    return inner_->tryUpgrade(name, token, ttl);
  }
  bool doExtend(const ReadWriteLease& lease, milliseconds ttl) override { return inner_->extendReadWrite(lease, ttl); }
  std::vector<ExtendResult> doExtendAll(const std::vector<ReadWriteLease>& leases, milliseconds ttl) override {
    return inner_->extendReadWriteAll(leases, ttl);
  }
  bool doLeave(std::string_view name, std::string_view token, ReadWriteMode mode, milliseconds ttl) override {
    return inner_->leaveReadWriteQueue(name, token, mode, ttl);
  }
  std::unique_ptr<IGrantWatch> doWatch(std::string_view name, std::string_view token) override {
    return inner_->watchReadWriteGrants(name, token);
  }
  ReadWriteInfo doInspect(std::string_view name) override { return inner_->inspectReadWrite(name); }

  std::shared_ptr<IReadWriteOperator> inner_;
  std::string variant_;
  std::unique_ptr<RawServer> raw_;
};

class BrokenSemaphore final : public ISemaphoreOperator {
 public:
  BrokenSemaphore(std::shared_ptr<ISemaphoreOperator> inner, std::string variant, const std::string& uri)
      : inner_(std::move(inner)), variant_(std::move(variant)) {
    if (variant_ == kWakesOne) {
      raw_ = std::make_unique<RawServer>(uri);
      wakeOneRelease_ = wakeOneRelease();
    }
  }
  [[nodiscard]] std::string semaphoreUnsupported() const override { return inner_->semaphoreUnsupported(); }

 private:
  SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                          std::uint32_t capacity, milliseconds lease, milliseconds waiterLease) override {
    if (variant_ == kClientClock) {
      // Every holder whose lease ends before the client's clock (kClientAhead ahead) "has expired".
      for (const auto& holder : inner_->inspectSemaphore(name).holders) {
        if (holder.token != token && holder.remaining < kClientAhead) (void)inner_->releasePermits(name, holder.token);
      }
    }
    return inner_->acquirePermits(name, token, permits, capacity, lease, waiterLease);
  }
  ReleaseResult doReleasePermits(std::string_view name, std::string_view token) override {
    if (raw_) {
      const detail::KeyNames names(kPrefix, name, false);
      const auto reply = raw_->evalText(wakeOneRelease_,
                                    {names.semaphore("state"), names.semaphore("deadlines"), names.semaphore("queue")},
                                    {std::string(token), names.semaphore("granted"), "5000", "86400000"});
      if (reply) {
        ReleaseResult result;
        result.released = reply->rfind("released ", 0) == 0 || *reply == "earlier";
        result.releasedEarlier = *reply == "earlier";
        if (reply->rfind("released ", 0) == 0) result.notified = static_cast<std::uint32_t>(std::stoul(reply->substr(9)));
        return result;
      }
    }
    ReleaseResult result = inner_->releasePermits(name, token);
    if (result.released || variant_ != kSemaphoreReleaseNoOwnerCheck) return result;
    const SemaphoreInfo info = inner_->inspectSemaphore(name);
    if (!info.holders.empty()) (void)inner_->releasePermits(name, info.holders.front().token);
    result.released = true;
    return result;
  }
  bool doExtendPermits(std::string_view name, std::string_view token, milliseconds lease) override {
    return inner_->extendPermits(name, token, lease);
  }
  std::vector<ExtendResult> doExtendPermitsAll(const std::vector<LeaseRef>& leases, milliseconds lease) override {
    return inner_->extendPermitsAll(leases, lease);
  }
  bool doLeavePermitQueue(std::string_view name, std::string_view token) override {
    return inner_->leavePermitQueue(name, token);
  }
  std::unique_ptr<IGrantWatch> doWatchPermitGrants(std::string_view name, std::string_view token) override {
    return inner_->watchPermitGrants(name, token);
  }
  std::uint32_t doResizeSemaphore(std::string_view name, std::uint32_t capacity) override {
    return inner_->resizeSemaphore(name, capacity);
  }
  SemaphoreInfo doInspectSemaphore(std::string_view name) override { return inner_->inspectSemaphore(name); }

  std::shared_ptr<ISemaphoreOperator> inner_;
  std::string variant_;
  std::unique_ptr<RawServer> raw_;
  std::string wakeOneRelease_;
};

}  // namespace

const std::vector<std::string>& brokenSharedVariants() {
  static const std::vector<std::string> variants = {kReadersPastWriter, kReadWriteReleaseNoOwnerCheck,
                                                    kSemaphoreReleaseNoOwnerCheck, kClientClock, kWakesOne};
  return variants;
}

std::shared_ptr<IReadWriteOperator> brokenReadWrite(std::shared_ptr<IReadWriteOperator> inner, const std::string& variant,
                                                    const std::string& uri) {
  if (variant != kReadersPastWriter && variant != kReadWriteReleaseNoOwnerCheck) return inner;
  return std::make_shared<BrokenReadWrite>(std::move(inner), variant, uri);
}

std::shared_ptr<ISemaphoreOperator> brokenSemaphore(std::shared_ptr<ISemaphoreOperator> inner, const std::string& variant,
                                                    const std::string& uri) {
  if (variant != kSemaphoreReleaseNoOwnerCheck && variant != kClientClock && variant != kWakesOne) return inner;
  return std::make_shared<BrokenSemaphore>(std::move(inner), variant, uri);
}

}  // namespace dlock::nemesis
