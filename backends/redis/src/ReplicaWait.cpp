// SPDX-License-Identifier: Apache-2.0
#include "ReplicaWait.h"

#include <cstdint>

#include "Errors.h"
#include "Reply.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

// WAIT for the configured replicas, with the connection's reply timeout stretched over the wait.
ReplyPtr waitForReplicas(const RedisOperatorOptions& options, Connection& connection) {
  connection.setReadTimeout(options.waitTimeout + options.commandTimeout);
  ReplyPtr reply = connection.command(
      {"WAIT", std::to_string(options.waitReplicas), std::to_string(options.waitTimeout.count())});
  connection.setReadTimeout(options.commandTimeout);
  return reply;
}

std::string undone(const UndoAcquire& undo, Connection& connection) {
  try {
    return undo(connection);
  } catch (const LockError& error) {
    return "could not release it; it ends at its TTL (" + withoutPrefix(error.what()) + ")";
  }
}

}  // namespace

void awaitReplicas(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where,
                   const UndoAcquire& undo) {
  if (options.waitReplicas == 0) return;
  const ReplyPtr reply = waitForReplicas(options, connection);
  if (reply->type == REDIS_REPLY_ERROR) {
    const std::string message = "dlock: " + where.text() + ": WAIT refused after the acquire: " +
                                std::string(replyText(*reply)) + "; " + undone(undo, connection);
    if (isTransientErrorReply(*reply)) throw ConnectionError(message);
    throw BackendError(message);
  }
  const std::uint64_t acknowledged = readCountReply(*reply, where);
  if (acknowledged >= options.waitReplicas) return;
  throw ConnectionError("dlock: " + where.text() + ": only " + std::to_string(acknowledged) + " of " +
                        std::to_string(options.waitReplicas) + " replicas acknowledged the lock within " +
                        std::to_string(options.waitTimeout.count()) + " ms; " + undone(undo, connection));
}

bool renewalsReplicated(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where) {
  if (options.waitReplicas == 0) return true;
  const ReplyPtr reply = waitForReplicas(options, connection);
  if (reply->type == REDIS_REPLY_ERROR) {
    logger()->warn("dlock: {}: WAIT refused after the renewal: {}; not counted", where.text(), replyText(*reply));
    return false;
  }
  const std::uint64_t acknowledged = readCountReply(*reply, where);
  if (acknowledged >= options.waitReplicas) return true;
  logger()->warn("dlock: {}: only {} of {} replicas acknowledged the renewal within {} ms; not counted", where.text(),
                 acknowledged, options.waitReplicas, options.waitTimeout.count());
  return false;
}

void requireRenewalReplicated(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where) {
  if (!renewalsReplicated(options, connection, where)) {
    throw ConnectionError("dlock: " + where.text() + ": the renewal reached too few replicas");
  }
}

}  // namespace dlock::detail
