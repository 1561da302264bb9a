// SPDX-License-Identifier: Apache-2.0
#include "RedisNode.h"

namespace dlock::detail {

RedisNode::RedisNode(const ConnectionOptions& connection, const PoolOptions& pool, bool sharded,
                     std::string displayAddress)
    : pool_(connection, pool),
      displayAddress_(displayAddress.empty() ? pool_.address() : std::move(displayAddress)),
      backoff_(pool),
      sharded_(sharded) {}

RedisNode::~RedisNode() = default;

std::shared_ptr<Subscriber> RedisNode::subscriber() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!subscriber_) {
    SubscriberOptions options;
    options.sharded = sharded_;
    subscriber_ = std::make_shared<Subscriber>([target = pool_.connectionOptions()] { return target; }, backoff_,
                                               options);
  }
  return subscriber_;
}

std::shared_ptr<Subscriber> RedisNode::subscriberIfAny() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return subscriber_;
}

// Called by a topology with its own locks held: the subscriber is told to stop, not waited for
// (its thread may be in a connect to the node being left, up to its timeout); the threads are
// joined when the node goes.
void RedisNode::retireSubscriber() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!subscriber_) return;
  retiredReconnects_ += subscriber_->reconnects();
  subscriber_->retire();
  retired_.push_back(std::move(subscriber_));
}

std::uint64_t RedisNode::reconnects() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return pool_.reconnects() + retiredReconnects_ + (subscriber_ ? subscriber_->reconnects() : 0);
}

}  // namespace dlock::detail
