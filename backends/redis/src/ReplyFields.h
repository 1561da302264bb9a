// SPDX-License-Identifier: Apache-2.0
// ReplyFields.h — strict readers of the elements of a script's array reply, for the queue-based
// scripts' readers (the fair lock's, the semaphore's): anything but the expected shape is a
// BackendError naming `where`, never a wrong "acquired"; an error reply is mapped by
// throwReplyError.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock::detail {

// "lock 'k' on 127.0.0.1:6379": where a reply came from, for error messages.
std::string describeCall(const char* operation, std::string_view key, const std::string& node);

[[noreturn]] void unexpectedReply(const std::string& where, const std::string& what);

// Decimal digits without sign or leading zero, at most `max`: true and `value` set, else false.
bool parseDecimal(std::string_view text, std::uint64_t max, std::uint64_t& value);

inline std::string_view textOf(const redisReply& element) { return std::string_view(element.str, element.len); }

// `reply` itself when it is an array of `size` elements.
const redisReply& arrayOf(const redisReply& reply, std::size_t size, const std::string& where);
long long integerAt(const redisReply& reply, std::size_t index, const std::string& where);
// A decimal string element from 0 to `max`.
std::uint64_t decimalAt(const redisReply& reply, std::size_t index, std::uint64_t max, const std::string& where);

// A queue release's reply: {1, admitted (0 to `maxAdmitted`)} released now, {2, 0} released
// earlier by this token (its record), {0, 0} not ours. `notified` is the admitted count.
ReleaseResult readQueueReleaseReply(const redisReply& reply, long long maxAdmitted, const std::string& where);

}  // namespace dlock::detail
