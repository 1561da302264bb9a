// SPDX-License-Identifier: Apache-2.0
#include "ClientKill.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "ConnectionPool.h"
#include "Reply.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

// A refused CLIENT KILL (an ACL without it) is a setting, not an event: said once per process.
std::atomic<bool> refusalLogged{false};

// The value of `name=` in CLIENT INFO's space-separated fields.
std::optional<std::string_view> field(std::string_view text, std::string_view name) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find_first_of(" \r\n", at), text.size());
    const std::string_view item = text.substr(at, end - at);
    if (item.size() > name.size() && item.substr(0, name.size()) == name && item[name.size()] == '=') {
      return item.substr(name.size() + 1);
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ClientIdentity> readClientInfo(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_STRING) return std::nullopt;
  const std::string_view text(reply.str, reply.len);
  const auto id = field(text, "id");
  const auto addr = field(text, "addr");
  if (!id || !addr || id->empty() || addr->empty()) return std::nullopt;
  char* end = nullptr;
  const std::string digits(*id);
  const long long value = std::strtoll(digits.c_str(), &end, 10);
  if (end == nullptr || *end != '\0' || value <= 0) return std::nullopt;
  return ClientIdentity{value, std::string(*addr)};
}

bool closeOnServer(ConnectionPool& pool, const ClientIdentity& victim) noexcept {
  try {
    const std::string id = std::to_string(victim.id);
    const ReplyPtr reply = pool.run([&](Connection& connection) {
      return connection.command({"CLIENT", "KILL", "ID", id, "ADDR", victim.addr, "SKIPME", "yes"});
    });
    if (reply->type == REDIS_REPLY_INTEGER) return true;  // 1 closed now, 0 closed already
    if (!refusalLogged.exchange(true)) {
      logger()->warn("dlock: cannot close a timed-out connection on {} (CLIENT KILL: {}); a cancelled acquire "
                     "on it is refused only while its tombstone lasts",
                     pool.address(), replyText(*reply));
    }
  } catch (const std::exception& error) {
    logger()->debug("dlock: closing connection {} on {} failed: {}", victim.id, pool.address(), error.what());
  }
  return false;
}

}  // namespace dlock::detail
