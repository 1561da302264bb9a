// SPDX-License-Identifier: Apache-2.0
#include "BrokenOperator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "../integration/broken/FairReleaseToNewest.h"
#include "redis/src/KeyNames.h"
#include "LeaseRecorder.h"
#include "RawServer.h"
#include "broken/ReleaseWithoutOwnerCheck.h"

namespace dlock::nemesis {

const std::vector<std::string>& brokenVariants() {
  static const std::vector<std::string> variants = {
      "renewal",   "fence-repeat",  "in-doubt-released", "no-deadline",         "no-notice",
      "late-deadline", "lost-reply-acquired", "fair-grant-unconfirmed", "release-deletes", "takes-held-key",
      "no-ttl", "stuck-after-error", "untyped-error", "refuses-first-key", "release-check", "fair-order"};
  return variants;
}

bool breaksServerSide(const std::string& variant) {
  return variant == "release-deletes" || variant == "takes-held-key" || variant == "no-ttl" ||
         variant == "release-check" || variant == "fair-order";
}

BrokenOperator::BrokenOperator(std::shared_ptr<IOperator> inner, std::string variant, const std::string& uri)
    : inner_(std::move(inner)), variant_(std::move(variant)) {
  const auto& known = brokenVariants();
  if (variant_ == "no-deadline" || variant_ == "no-notice" || std::find(known.begin(), known.end(), variant_) == known.end()) {
    throw std::invalid_argument("BrokenOperator: no operator variant '" + variant_ + "'");
  }
  if (breaksServerSide(variant_)) raw_ = std::make_unique<RawServer>(uri);
}

BrokenOperator::~BrokenOperator() = default;

template <typename Call>
auto BrokenOperator::guarded(Call&& call) -> decltype(call()) {
  if (variant_ != "stuck-after-error") return call();
  if (stuck_) throw ConnectionError("dlock: " + describe() + ": stuck since an earlier connection error");
  try {
    return call();
  } catch (const ConnectionError&) {
    stuck_ = true;
    throw;
  }
}

IFairOperator& BrokenOperator::queue() const { return fairQueueOf(*inner_); }

std::string BrokenOperator::fairUnsupported() const { return fairUnsupportedBy(*inner_); }

namespace {

// release-deletes, takes-held-key: a key with less than this left counts as free.
constexpr std::chrono::milliseconds kNearlyFree{300};

// late-deadline: the server is asked for this much less than the lock counts on.
constexpr std::chrono::milliseconds kLate{40};

std::chrono::milliseconds shorter(std::chrono::milliseconds ttl) { return ttl > kLate * 2 ? ttl - kLate : ttl; }

// What the lock is told of a lease the server was asked for `shorter(ttl)`: the whole ttl.
std::chrono::milliseconds widened(std::chrono::milliseconds validity, std::chrono::milliseconds ttl) {
  return validity.count() > 0 ? validity + (ttl - shorter(ttl)) : validity;
}

}  // namespace

AcquireResult BrokenOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  if (variant_ == "refuses-first-key" && key == "nemesis-0") return AcquireResult{false, 0, {}, std::chrono::milliseconds(10)};
  if (variant_ == "untyped-error") {
    try {
      return inner_->lock(key, token, ttl);
    } catch (const ConnectionError& error) {
      throw std::runtime_error(error.what());
    }
  }
  if (variant_ == "no-ttl") {
    const AcquireResult result = inner_->lock(key, token, ttl);
    if (result.acquired) raw_->persist(std::string(key));
    return result;
  }
  if (variant_ == "stuck-after-error") return guarded([&] { return inner_->lock(key, token, ttl); });
  if (variant_ == "late-deadline") {
    AcquireResult result = inner_->lock(key, token, shorter(ttl));
    result.validity = widened(result.validity, ttl);
    return result;
  }
  if (variant_ == "lost-reply-acquired") {
    try {
      return inner_->lock(key, token, ttl);
    } catch (const ConnectionError&) {
      return AcquireResult{true, 0, {}, {}};  // no reply, counted as taken
    }
  }
  AcquireResult result = inner_->lock(key, token, ttl);
  if (variant_ == "takes-held-key" && !result.acquired && result.holderTtl.count() > 0 && result.holderTtl < kNearlyFree) {
    if (const auto fence = raw_->take(std::string(key), std::string(token), ttl.count())) {
      return AcquireResult{true, *fence, {}, {}};
    }
  }
  if (variant_ != "fence-repeat" || !result.acquired) return result;
  const std::lock_guard<std::mutex> guard(mutex_);
  auto previous = previousToken_.find(key);
  if (previous == previousToken_.end()) {
    previousToken_.emplace(std::string(key), result.fencingToken);
  } else {
    result.fencingToken = previous->second;
  }
  return result;
}

ReleaseResult BrokenOperator::unlock(std::string_view key, std::string_view token) {
  if (variant_ == "release-check") {
    const detail::KeyNames names("dlock:", key, false);
    const auto release = [&] {
      return raw_->eval(broken::kReleaseWithoutOwnerCheck, {names.lock()}, {std::string(token), names.channel()});
    };
    // Once more on a new connection if the first failed (a restarted server), as the library's
    // pool retries a release.
    std::optional<long long> notified = release();
    if (!notified) notified = release();
    if (notified) {
      ReleaseResult result;
      result.released = *notified >= 0;
      result.notified = static_cast<std::uint32_t>(std::max(*notified, 0LL));
      return result;
    }  // not sent: released as the library releases
  }
  ReleaseResult result = guarded([&] { return inner_->unlock(key, token); });
  if (variant_ == "release-deletes" && !result.released) {
    const auto left = raw_->pttl(std::string(key));
    if (left && *left > 0 && *left < kNearlyFree.count() && raw_->remove(std::string(key))) result.released = true;
  }
  if (variant_ == "in-doubt-released" && !result.released) {
    result.released = true;  // as if the server had shown an earlier try ran: no evidence behind it
  }
  return result;
}

namespace {

// fair-grant-unconfirmed's watch: every hand-off dated "now", so none is ever older than the
// waiter's last attempt (the message outlives the attempt it answered).
class CurrentLookingGrants final : public IGrantWatch {
 public:
  explicit CurrentLookingGrants(std::unique_ptr<IGrantWatch> inner) : inner_(std::move(inner)) {}
  Grant waitForGrant(std::chrono::milliseconds timeout) override {
    Grant grant = inner_->waitForGrant(timeout);
    if (grant.kind == Grant::Kind::Granted) grant.backendMillis = std::numeric_limits<std::int64_t>::max();
    return grant;
  }

 private:
  std::unique_ptr<IGrantWatch> inner_;
};

}  // namespace

ReleaseResult BrokenOperator::fairUnlock(std::string_view key, std::string_view token) {
  if (variant_ == "fair-order") (void)raw_->eval(test::broken::kNewestFirst, {test::broken::fairQueueKey(key)}, {});
  return queue().fairUnlock(key, token);
}

std::unique_ptr<IGrantWatch> BrokenOperator::watchGrants(std::string_view key, std::string_view token) {
  std::unique_ptr<IGrantWatch> watch = queue().watchGrants(key, token);
  if (variant_ != "fair-grant-unconfirmed") return watch;
  return std::make_unique<CurrentLookingGrants>(std::move(watch));
}

bool BrokenOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  if (variant_ == "renewal") return true;
  if (variant_ == "late-deadline") return inner_->extend(key, token, shorter(ttl));
  if (variant_ == "fair-grant-unconfirmed") {
    (void)inner_->extend(key, token, ttl);  // the fair lock extends only a claim here
    return true;
  }
  return guarded([&] { return inner_->extend(key, token, ttl); });
}

std::vector<ExtendResult> BrokenOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (variant_ == "renewal") return std::vector<ExtendResult>(leases.size(), ExtendResult{true, false, {}});
  if (variant_ == "late-deadline") {
    std::vector<ExtendResult> results = inner_->extendAll(leases, shorter(ttl));
    for (ExtendResult& result : results) result.validity = widened(result.validity, ttl);
    return results;
  }
  return guarded([&] {
    std::vector<ExtendResult> results = inner_->extendAll(leases, ttl);
    // The default extendAll reports a connection error as unknown, not as a throw.
    if (variant_ == "stuck-after-error" && std::any_of(results.begin(), results.end(), [](const ExtendResult& r) { return r.unknown; })) {
      stuck_ = true;
    }
    return results;
  });
}

}  // namespace dlock::nemesis
