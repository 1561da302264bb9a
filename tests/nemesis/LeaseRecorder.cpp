// SPDX-License-Identifier: Apache-2.0
#include "LeaseRecorder.h"

#include <algorithm>

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

milliseconds validFor(milliseconds reported, milliseconds ttl) { return reported.count() > 0 ? std::min(reported, ttl) : ttl; }

class RecordingGrantWatch final : public IGrantWatch {
 public:
  RecordingGrantWatch(std::unique_ptr<IGrantWatch> inner, LeaseRecorder& recorder, std::string key, std::string token)
      : inner_(std::move(inner)), recorder_(recorder), key_(std::move(key)), token_(std::move(token)) {}

  Grant waitForGrant(milliseconds timeout) override {
    Grant grant = inner_->waitForGrant(timeout);
    if (grant.kind == Grant::Kind::Granted) recorder_.granted(key_, token_, grant);
    return grant;
  }

 private:
  std::unique_ptr<IGrantWatch> inner_;
  LeaseRecorder& recorder_;
  std::string key_;
  std::string token_;
};

}  // namespace

IFairOperator& fairQueueOf(IOperator& inner) {
  auto* queue = dynamic_cast<IFairOperator*>(&inner);
  if (queue == nullptr) throw ConfigError("dlock: " + inner.describe() + " has no fair queue");
  return *queue;
}

std::string fairUnsupportedBy(const IOperator& inner) {
  const auto* queue = dynamic_cast<const IFairOperator*>(&inner);
  return queue == nullptr ? inner.describe() + " has no fair queue" : queue->fairUnsupported();
}

LeaseRecorder::LeaseRecorder(std::shared_ptr<IOperator> inner, Sink sink) : inner_(std::move(inner)), sink_(std::move(sink)) {}

void LeaseRecorder::record(std::string_view key, std::string_view token, std::int64_t sentNs, milliseconds validity,
                           std::uint64_t fence) const {
  Op op;
  op.kind = Kind::Info;
  op.op = "lease";
  op.key = std::string(key);
  op.token = fence;
  op.value = std::to_string(validity.count());
  op.timeNs = sentNs;
  op.message = std::string(token);
  sink_(std::move(op));
}

AcquireResult LeaseRecorder::lock(std::string_view key, std::string_view token, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  AcquireResult result = inner_->lock(key, token, ttl);
  if (result.acquired) record(key, token, sent, validFor(result.validity, ttl), result.fencingToken);
  return result;
}

bool LeaseRecorder::extend(std::string_view key, std::string_view token, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  const bool extended = inner_->extend(key, token, ttl);
  if (extended) record(key, token, sent, ttl, 0);
  return extended;
}

std::vector<ExtendResult> LeaseRecorder::extendAll(const std::vector<LeaseRef>& leases, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  std::vector<ExtendResult> results = inner_->extendAll(leases, ttl);
  for (std::size_t i = 0; i < results.size() && i < leases.size(); ++i) {
    if (results[i].extended) record(leases[i].key, leases[i].token, sent, validFor(results[i].validity, ttl), 0);
  }
  return results;
}

IFairOperator& LeaseRecorder::queue() const { return fairQueueOf(*inner_); }

std::string LeaseRecorder::fairUnsupported() const { return fairUnsupportedBy(*inner_); }

FairAcquireResult LeaseRecorder::fairLock(std::string_view key, std::string_view token, milliseconds ttl,
                                          milliseconds waiterLease) {
  const std::int64_t sent = monotonicNs();
  FairAcquireResult result = queue().fairLock(key, token, ttl, waiterLease);
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    if (result.acquired) {
      anchors_.erase({std::string(key), std::string(token)});
    } else {
      anchors_[{std::string(key), std::string(token)}] = Anchor{sent, result.backendMillis};
    }
  }
  if (result.acquired) record(key, token, sent, validFor(result.validity, ttl), result.fencingToken);
  return result;
}

bool LeaseRecorder::leaveQueue(std::string_view key, std::string_view token, milliseconds ttl) {
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    anchors_.erase({std::string(key), std::string(token)});  // the token is not used again
  }
  return queue().leaveQueue(key, token, ttl);
}

std::unique_ptr<IGrantWatch> LeaseRecorder::watchGrants(std::string_view key, std::string_view token) {
  return std::make_unique<RecordingGrantWatch>(queue().watchGrants(key, token), *this, std::string(key),
                                               std::string(token));
}

void LeaseRecorder::granted(const std::string& key, const std::string& token, const Grant& grant) {
  Anchor anchor;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    const auto found = anchors_.find({key, token});
    if (found == anchors_.end()) return;  // no attempt placed it: no evidence
    anchor = found->second;
    anchors_.erase(found);
  }
  const std::int64_t since = std::max<std::int64_t>(0, grant.backendMillis - anchor.backendMillis);
  record(key, token, anchor.sentNs + since * 1'000'000, grant.lease, grant.fencingToken);
}

}  // namespace dlock::nemesis
