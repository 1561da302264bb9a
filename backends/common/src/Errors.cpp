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

bool isTransientErrorReply(const redisReply& reply) {
  for (const char* prefix : {"LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS"}) {
    if (isErrorReply(reply, prefix)) return true;
  }
  return false;
}

void throwReplyError(const redisReply& reply, const std::string& where) {
  if (reply.type != REDIS_REPLY_ERROR) {
    throw BackendError("dlock: " + where + ": unexpected reply of type " + std::to_string(reply.type));
  }
  const std::string text(replyText(reply));
  if (isTransientErrorReply(reply)) throw ConnectionError("dlock: " + where + ": server unavailable: " + text);
  throw BackendError("dlock: " + where + ": " + text);
}

}  // namespace dlock::detail
