// SPDX-License-Identifier: Apache-2.0
// MessageWatch.h — a subscription that hears one subscriber's messages with their payload: how a
// fair waiter learns that the key was handed to it, and with which fencing token.
// Not thread-safe: one waiter.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace dlock::detail {

struct MessageWait {
  enum class Outcome : std::uint8_t {
    TimedOut,
    Message,      // `payload` is the message
    MaybeMissed,  // the subscription was lost and is back, or the server dropped it: ask again
  };
  Outcome outcome = Outcome::TimedOut;
  std::string payload;
};

class IMessageWatch {
 public:
  IMessageWatch() = default;
  IMessageWatch(const IMessageWatch&) = delete;
  IMessageWatch& operator=(const IMessageWatch&) = delete;
  virtual ~IMessageWatch() = default;

  // Blocks until a message for this watch, a possible miss, or `timeout`.
  virtual MessageWait waitForMessage(std::chrono::milliseconds timeout) = 0;

  // As IGrantWatch::notifyOnGrant: `heard` is called whenever waitForMessage(0) may return
  // something, on the subscriber's thread, its lock held. False when the watch cannot.
  virtual bool notifyOnMessage(std::function<void()> heard) {
    (void)heard;
    return false;
  }
};

}  // namespace dlock::detail
