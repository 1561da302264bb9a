// SPDX-License-Identifier: Apache-2.0
// Reply.h — ownership of hiredis replies: ReplyPtr frees with freeReplyObject.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string_view>

namespace dlock::detail {

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept {
    if (reply != nullptr) freeReplyObject(reply);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

inline std::string_view replyText(const redisReply& reply) {
  return reply.str == nullptr ? std::string_view() : std::string_view(reply.str, reply.len);
}

inline bool isErrorReply(const redisReply& reply, std::string_view prefix) {
  return reply.type == REDIS_REPLY_ERROR && replyText(reply).substr(0, prefix.size()) == prefix;
}

}  // namespace dlock::detail
