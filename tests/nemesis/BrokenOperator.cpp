// SPDX-License-Identifier: Apache-2.0
#include "BrokenOperator.h"

#include <stdexcept>

namespace dlock::nemesis {

const std::vector<std::string>& brokenVariants() {
  static const std::vector<std::string> variants = {"renewal",   "fence-repeat", "in-doubt-released", "no-deadline",
                                                    "no-notice", "late-deadline"};
  return variants;
}

BrokenOperator::BrokenOperator(std::shared_ptr<IOperator> inner, std::string variant)
    : inner_(std::move(inner)), variant_(std::move(variant)) {
  if (variant_ != "renewal" && variant_ != "fence-repeat" && variant_ != "in-doubt-released" &&
      variant_ != "late-deadline") {
    throw std::invalid_argument("BrokenOperator: no operator variant '" + variant_ + "'");
  }
}

namespace {

// late-deadline: the server is asked for this much less than the lock counts on.
constexpr std::chrono::milliseconds kLate{40};

std::chrono::milliseconds shorter(std::chrono::milliseconds ttl) { return ttl > kLate * 2 ? ttl - kLate : ttl; }

// What the lock is told of a lease the server was asked for `shorter(ttl)`: the whole ttl.
std::chrono::milliseconds widened(std::chrono::milliseconds validity, std::chrono::milliseconds ttl) {
  return validity.count() > 0 ? validity + (ttl - shorter(ttl)) : validity;
}

}  // namespace

AcquireResult BrokenOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  if (variant_ == "late-deadline") {
    AcquireResult result = inner_->lock(key, token, shorter(ttl));
    result.validity = widened(result.validity, ttl);
    return result;
  }
  AcquireResult result = inner_->lock(key, token, ttl);
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
  ReleaseResult result = inner_->unlock(key, token);
  if (variant_ == "in-doubt-released" && !result.released) {
    result.released = true;  // as if the server had shown an earlier try ran: no evidence behind it
  }
  return result;
}

bool BrokenOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  if (variant_ == "renewal") return true;
  if (variant_ == "late-deadline") return inner_->extend(key, token, shorter(ttl));
  return inner_->extend(key, token, ttl);
}

std::vector<ExtendResult> BrokenOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (variant_ == "renewal") return std::vector<ExtendResult>(leases.size(), ExtendResult{true, false, {}});
  if (variant_ == "late-deadline") {
    std::vector<ExtendResult> results = inner_->extendAll(leases, shorter(ttl));
    for (ExtendResult& result : results) result.validity = widened(result.validity, ttl);
    return results;
  }
  return inner_->extendAll(leases, ttl);
}

}  // namespace dlock::nemesis
