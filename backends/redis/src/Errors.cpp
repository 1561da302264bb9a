// SPDX-License-Identifier: Apache-2.0
#include "Errors.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "Reply.h"
#include "dlock/LockError.h"

namespace dlock::detail {

namespace {

// The hint for a failure that a plain-text server gives a TLS client, or the reverse.
constexpr const char* kPlainPortHint = "the server did not answer in TLS: is this a plain-text port? (use redis://)";
constexpr const char* kTlsPortHint = "does the server expect TLS on this port? use rediss://";

std::string verifyCause(const TlsFailure& failure) {
  const std::string reason = X509_verify_cert_error_string(failure.verifyResult);
  switch (failure.verifyResult) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return "the server's certificate is not signed by a trusted CA (" + reason +
             "); give its CA with tls_ca_file or tls_ca_dir";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "the server's certificate does not name '" + failure.verifiedName + "' (name mismatch; " +
             "tls_server_name sets the name to verify)";
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return "the server's certificate has expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "the server's certificate is not yet valid";
    default:
      return "the server's certificate failed verification: " + reason;
  }
}

std::string libraryCause(const TlsFailure& failure) {
  const int reason = ERR_GET_REASON(failure.error);
  if (ERR_GET_LIB(failure.error) == ERR_LIB_SSL) {
    switch (reason) {
      case SSL_R_WRONG_VERSION_NUMBER:
      case SSL_R_PACKET_LENGTH_TOO_LONG:
      case SSL_R_UNEXPECTED_EOF_WHILE_READING:
        return kPlainPortHint;
      case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
        if (!failure.clientCertificate) {
          return "the server requires a client certificate (set tls_cert_file and tls_key_file)";
        }
        break;
      case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
        return "the server refused the client certificate (not signed by a CA it trusts)";
      default:
        break;
    }
  }
  const char* text = ERR_reason_error_string(failure.error);
  return std::string("TLS failed: ") + (text != nullptr ? text : "unknown error");
}

}  // namespace

void throwSystemError(int error, const std::string& where) {
  if (error == ENOMEM) throw std::bad_alloc();
  if (error == ETIMEDOUT || error == EAGAIN || error == EWOULDBLOCK) throwTimeoutError(where);
  throw ConnectionError("dlock: " + where + ": " + std::strerror(error));
}

void throwClosedError(const std::string& where, bool tlsPortHint) {
  throw ConnectionError("dlock: " + where + ": the server closed the connection" +
                        (tlsPortHint ? std::string(" before answering: ") + kTlsPortHint : ""));
}

void throwForkedError(const std::string& where) {
  throw ConnectionError("dlock: " + where + ": the connection belongs to the parent process (fork)");
}

void throwTimeoutError(const std::string& where) { throw ConnectionError("dlock: " + where + ": timed out"); }

void throwTlsError(const TlsFailure& failure, const std::string& where) {
  if (failure.verifyResult != X509_V_OK) throw TlsFailureError("dlock: " + where + ": " + verifyCause(failure));
  if (failure.error != 0) throw TlsFailureError("dlock: " + where + ": " + libraryCause(failure));
  if (failure.systemError != 0) throwSystemError(failure.systemError, where);
  if (failure.timedOut) throw TlsFailureError("dlock: " + where + ": timed out (" + kPlainPortHint + ")");
  if (failure.closed) {
    throw TlsFailureError("dlock: " + where + ": the server closed the connection (" + kPlainPortHint + ")");
  }
  throw TlsFailureError("dlock: " + where + ": TLS failed");
}

void throwReaderError(const redisReader& reader, const std::string& where, int firstByte) {
  // 0x15 and 0x16 open a TLS alert and handshake record: a TLS server answering plain text.
  const bool tlsRecord = firstByte == 0x15 || firstByte == 0x16;
  if (reader.err == REDIS_ERR_OOM) throw std::bad_alloc();
  throw ConnectionError("dlock: " + where + ": protocol error" +
                        (tlsRecord ? std::string(": got a TLS record; ") + kTlsPortHint : ": " + std::string(reader.errstr)));
}

bool isTransientErrorText(std::string_view text) {
  for (std::string_view prefix : {"LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS"}) {
    if (text.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

bool isTransientErrorReply(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ERROR && isTransientErrorText(replyText(reply));
}

void throwErrorText(std::string_view text, const std::string& where) {
  // A bound script refused unrun: its caller had stopped waiting (Scripts.h, makeBoundScript).
  if (text.substr(0, 9) == "DLOCKLATE") throw LateCallError("dlock: " + where + ": " + std::string(text));
  if (isTransientErrorText(text)) {
    throw ServerUnavailableError("dlock: " + where + ": server unavailable: " + std::string(text), std::string(text));
  }
  throw ServerReplyError("dlock: " + where + ": " + std::string(text), std::string(text));
}

void throwReplyError(const redisReply& reply, const std::string& where) {
  if (reply.type != REDIS_REPLY_ERROR) {
    throw BackendError("dlock: " + where + ": unexpected reply of type " + std::to_string(reply.type));
  }
  throwErrorText(replyText(reply), where);
}

std::string withoutPrefix(const std::string& message) {
  constexpr std::string_view kPrefix = "dlock: ";
  return message.compare(0, kPrefix.size(), kPrefix) == 0 ? message.substr(kPrefix.size()) : message;
}

}  // namespace dlock::detail
