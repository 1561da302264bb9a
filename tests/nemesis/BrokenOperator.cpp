// SPDX-License-Identifier: Apache-2.0
#include "BrokenOperator.h"

#include <stdexcept>

namespace dlock::nemesis {

const std::vector<std::string>& brokenVariants() {
  static const std::vector<std::string> variants = {"renewal", "fence-repeat", "in-doubt-released", "no-deadline",
                                                    "no-notice"};
  return variants;
}

BrokenOperator::BrokenOperator(std::shared_ptr<IOperator> inner, std::string variant)
    : inner_(std::move(inner)), variant_(std::move(variant)) {
  if (variant_ != "renewal" && variant_ != "fence-repeat" && variant_ != "in-doubt-released") {
    throw std::invalid_argument("BrokenOperator: no operator variant '" + variant_ + "'");
  }
}

AcquireResult BrokenOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
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
  return inner_->extend(key, token, ttl);
}

std::vector<ExtendResult> BrokenOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (variant_ == "renewal") return std::vector<ExtendResult>(leases.size(), ExtendResult{true, false, {}});
  return inner_->extendAll(leases, ttl);
}

}  // namespace dlock::nemesis
