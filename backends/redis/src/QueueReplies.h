// SPDX-License-Identifier: Apache-2.0
// QueueReplies.h — strict readers of the replies of the queue scripts (FairScripts.h,
// ReadWriteScripts.h), as Replies.h's are of the default lock's: a reply not exactly of the
// expected shape is a BackendError, never a wrong "acquired"; error replies go to throwReplyError.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/IFairOperator.h"

namespace dlock::detail {

[[noreturn]] void unexpectedReply(const std::string& where, const std::string& what);
// "lock 'k' on 127.0.0.1:6379", for messages.
std::string describeCall(const char* operation, std::string_view key, const std::string& node);
// Decimal digits without sign or leading zero, at most `max`: false otherwise.
bool parseDecimal(std::string_view text, std::uint64_t max, std::uint64_t& value);
std::string_view textOf(const redisReply& element);
// `reply` when it is an array of `size` elements (an error reply thrown as throwReplyError does).
const redisReply& arrayOf(const redisReply& reply, std::size_t size, const std::string& where);
long long integerAt(const redisReply& reply, std::size_t index, const std::string& where);
// Element `index` as decimal text from 0 to `max`.
std::uint64_t decimalAt(const redisReply& reply, std::size_t index, std::uint64_t max, const std::string& where);

// {1, "fence", "now", validity} or {0, pttl, "now", position}; a fence below `minFence` is refused
// (a reader's fence may be 0: no write yet).
FairAcquireResult readQueueAcquireReply(const redisReply& reply, const std::string& where, std::uint64_t minFence);
// {1, admitted} (at most `maxAdmitted`), {2, 0} or {0, 0}.
ReleaseResult readQueueReleaseReply(const redisReply& reply, const std::string& where, long long maxAdmitted);

}  // namespace dlock::detail
