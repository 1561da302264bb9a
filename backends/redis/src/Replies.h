// SPDX-License-Identifier: Apache-2.0
// Replies.h — strict readers of our scripts' replies. Whatever the server sends, a reply that is
// not exactly the expected shape is an error (BackendError), never a wrong "acquired"; error
// replies are mapped by throwReplyError.
#pragma once

#include <hiredis/hiredis.h>

#include <string>
#include <string_view>
#include <vector>

#include "dlock/IOperator.h"

namespace dlock::detail {

// Where a reply came from, for error messages: "lock 'k' on 127.0.0.1:6379". Formatted only when
// a reader raises, so the hot path builds no message. Refers to its parts: use it within the
// full expression that made it.
class ReplySource {
 public:
  ReplySource(const char* operation, std::string_view key, std::string_view address)
      : operation_(operation), key_(key), address_(address) {}
  // A description made beforehand.
  ReplySource(const std::string& text) : text_(&text) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] std::string text() const;

 private:
  const char* operation_ = nullptr;
  std::string_view key_;
  std::string_view address_;
  const std::string* text_ = nullptr;
};

// {1, "fence" >= 1} or {0, pttl}.
AcquireResult readAcquireReply(const redisReply& reply, const ReplySource& where);
// {1, subscribers}, {2, 0} (released earlier: releasedEarlier) or {0, 0}.
ReleaseResult readReleaseReply(const redisReply& reply, const ReplySource& where);
// Integer 1 or 0.
bool readFlagReply(const redisReply& reply, const ReplySource& where);
// An array of `count` integers 1 or 0.
std::vector<bool> readFlagsReply(const redisReply& reply, std::size_t count, const ReplySource& where);
// A non-negative integer.
std::uint64_t readCountReply(const redisReply& reply, const ReplySource& where);
// {pttl, "fence"[, "since-µs\nlabel"]}.
LeaseInfo readInspectReply(const redisReply& reply, const ReplySource& where);
// "fence": a fencing counter as text, 1 to 2^63 - 1.
std::uint64_t readFenceReply(const redisReply& reply, const ReplySource& where);

}  // namespace dlock::detail
