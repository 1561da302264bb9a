// Errors.h — hiredis failures mapped to dlock's errors, in one place (redis-plus-plus's errors.cpp).
//
//   throwContextError   I/O error, EOF, protocol error, timeout → ConnectionError (with errno);
//                       out of memory → std::bad_alloc. The context must be discarded after it.
//   throwReplyError     an error reply: LOADING, BUSY, MASTERDOWN, READONLY, TRYAGAIN,
//                       CLUSTERDOWN, NOREPLICAS (the server cannot serve now) → ConnectionError;
//                       anything else (NOPERM, OOM, WRONGTYPE, ...) → BackendError.
#pragma once

#include <hiredis/hiredis.h>

#include <string>

namespace dlock::detail {

// `where`: what was being done and to whom, e.g. "EVALSHA on 127.0.0.1:6379". Never a password.
[[noreturn]] void throwContextError(const redisContext& context, const std::string& where);
[[noreturn]] void throwReplyError(const redisReply& reply, const std::string& where);

// True for error replies that mean "not now" rather than "never" (see above).
[[nodiscard]] bool isTransientErrorReply(const redisReply& reply);

}  // namespace dlock::detail
