// Errors.h — hiredis failures mapped to dlock's errors, in one place (redis-plus-plus's errors.cpp).
//
//   throwContextError   I/O error, EOF, protocol error, timeout → ConnectionError (with errno);
//                       out of memory → std::bad_alloc. The context must be discarded after it.
//   throwReplyError     an error reply: LOADING, BUSY, MASTERDOWN, READONLY, TRYAGAIN,
//                       CLUSTERDOWN, NOREPLICAS (the server cannot serve now) →
//                       ServerUnavailableError (a ConnectionError); anything else (NOPERM, OOM,
//                       WRONGTYPE, ...) → ServerReplyError (a BackendError).
#pragma once

#include <hiredis/hiredis.h>

#include <string>
#include <string_view>

#include "dlock/LockError.h"

namespace dlock::detail {

// An error reply the server gave instead of running the command: LOADING, BUSY, MASTERDOWN,
// READONLY, TRYAGAIN, CLUSTERDOWN, NOREPLICAS. A ConnectionError to users; to a backend it also
// says "nothing ran", so the command may be sent again elsewhere (another master, a retry).
class DLOCK_API ServerUnavailableError final : public ConnectionError {
 public:
  ServerUnavailableError(const std::string& message, std::string reply)
      : ConnectionError(message), reply_(std::move(reply)) {}
  [[nodiscard]] const std::string& reply() const noexcept { return reply_; }

 private:
  std::string reply_;
};

// Any other error reply (NOPERM, OOM, WRONGTYPE, MOVED where not handled, ...): a BackendError
// that keeps the server's words, for a backend that can act on them.
class DLOCK_API ServerReplyError final : public BackendError {
 public:
  ServerReplyError(const std::string& message, std::string reply) : BackendError(message), reply_(std::move(reply)) {}
  [[nodiscard]] const std::string& reply() const noexcept { return reply_; }

 private:
  std::string reply_;
};

// `where`: what was being done and to whom, e.g. "EVALSHA on 127.0.0.1:6379". Never a password.
[[noreturn]] void throwContextError(const redisContext& context, const std::string& where);
[[noreturn]] void throwReplyError(const redisReply& reply, const std::string& where);
// The same for an error reply's text kept for later (a refused subscription).
[[noreturn]] void throwErrorText(std::string_view text, const std::string& where);

// True for error replies that mean "not now" rather than "never" (see above).
[[nodiscard]] bool isTransientErrorReply(const redisReply& reply);
[[nodiscard]] bool isTransientErrorText(std::string_view text);

}  // namespace dlock::detail
