#include "Errors.h"

#include <cerrno>
#include <cstring>
#include <new>

#include "Reply.h"
#include "dlock/LockError.h"

namespace dlock::detail {

void throwContextError(const redisContext& context, const std::string& where) {
  std::string detail = context.errstr[0] != '\0' ? context.errstr : "unknown error";
  switch (context.err) {
    case REDIS_ERR_OOM:
      throw std::bad_alloc();
    case REDIS_ERR_IO:
      // hiredis reports a read timeout as an I/O error with EAGAIN.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT ||
          detail.find("temporarily unavailable") != std::string::npos) {
        detail = "timed out";
      }
      throw ConnectionError("dlock: " + where + ": " + detail);
    case REDIS_ERR_EOF:
      throw ConnectionError("dlock: " + where + ": the server closed the connection");
    case REDIS_ERR_PROTOCOL:
      throw ConnectionError("dlock: " + where + ": protocol error: " + detail);
    default:
      throw ConnectionError("dlock: " + where + ": " + detail);
  }
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

}  // namespace dlock::detail
