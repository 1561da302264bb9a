// SPDX-License-Identifier: Apache-2.0
// Errors.h — socket, TLS and hiredis failures mapped to dlock's errors, in one place
// (redis-plus-plus's errors.cpp).
//
//   throwSystemError    a socket call's errno → ConnectionError ("timed out" for ETIMEDOUT/EAGAIN)
//   throwClosedError    EOF → ConnectionError; throwForkedError: a parent's connection in a child
//   throwTlsError       a TLS failure → ConnectionError naming the cause (unknown CA, name
//                       mismatch, expired certificate, a plain-text port, a client certificate
//                       required); never key material
//   throwReaderError    a RESP protocol error → ConnectionError (a TLS record: "use rediss://")
//   The connection must be discarded after any of them.
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

// A TLS failure (an unknown CA, a name mismatch, a plain-text port...): a ConnectionError whose
// message already names the fix, so a caller adds no "check the host and port" to it.
class DLOCK_API TlsFailureError final : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
};

// Why a TLS call failed, read from OpenSSL by TlsTransport.
struct TlsFailure {
  long verifyResult = 0;          // SSL_get_verify_result: X509_V_OK or the chain's fault
  unsigned long error = 0;        // ERR_peek_last_error: the library's reason, 0 for none
  int systemError = 0;            // errno of a failed socket call, 0 for none
  bool closed = false;            // the peer ended the stream without a TLS close
  bool timedOut = false;          // the handshake ran out of the connect timeout
  std::string verifiedName;       // the DNS name or IP address the certificate had to name
  bool clientCertificate = false;  // one was configured (tls_cert_file)
};

// `where`: what was being done and to whom, e.g. "EVALSHA on 127.0.0.1:6379". Never a password.
[[noreturn]] void throwSystemError(int error, const std::string& where);
// `tlsPortHint`: the server closed a plain TCP connection in its handshake before sending a byte,
// as a TLS port does to a plain client (a server that shut down under a later command did not).
[[noreturn]] void throwClosedError(const std::string& where, bool tlsPortHint = false);
[[noreturn]] void throwForkedError(const std::string& where);
[[noreturn]] void throwTimeoutError(const std::string& where);
[[noreturn]] void throwTlsError(const TlsFailure& failure, const std::string& where);
// `firstByte` is the first byte the connection received.
[[noreturn]] void throwReaderError(const redisReader& reader, const std::string& where, int firstByte);
[[noreturn]] void throwReplyError(const redisReply& reply, const std::string& where);
// The same for an error reply's text kept for later (a refused subscription).
[[noreturn]] void throwErrorText(std::string_view text, const std::string& where);

// An error's message without its leading "dlock: ", to quote it inside another message.
[[nodiscard]] std::string withoutPrefix(const std::string& message);

// True for error replies that mean "not now" rather than "never" (see above).
[[nodiscard]] bool isTransientErrorReply(const redisReply& reply);
[[nodiscard]] bool isTransientErrorText(std::string_view text);

}  // namespace dlock::detail
