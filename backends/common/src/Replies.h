// Replies.h — strict readers of our scripts' replies. Whatever the server sends, a reply that is
// not exactly the expected shape is an error (BackendError), never a wrong "acquired"; error
// replies are mapped by throwReplyError.
#pragma once

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "dlock/IOperator.h"

namespace dlock::detail {

// {1, fence >= 1} or {0, pttl}.
AcquireResult readAcquireReply(const redisReply& reply, const std::string& where);
// {1, subscribers} or {0, 0}.
ReleaseResult readReleaseReply(const redisReply& reply, const std::string& where);
// Integer 1 or 0.
bool readFlagReply(const redisReply& reply, const std::string& where);
// An array of `count` integers 1 or 0.
std::vector<bool> readFlagsReply(const redisReply& reply, std::size_t count, const std::string& where);
// A non-negative integer.
std::uint64_t readCountReply(const redisReply& reply, const std::string& where);
// {pttl, fence}.
LeaseInfo readInspectReply(const redisReply& reply, const std::string& where);

}  // namespace dlock::detail
