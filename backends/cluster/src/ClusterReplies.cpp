// SPDX-License-Identifier: Apache-2.0
#include "ClusterReplies.h"

#include <charconv>
#include <string_view>

#include "redis/src/Reply.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"

namespace dlock::detail {
namespace {

[[noreturn]] void malformed(const std::string& where, const std::string& what) {
  throw BackendError("dlock: " + where + ": unexpected reply: " + what);
}

std::optional<long long> toInteger(std::string_view text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool validPort(long long port) { return port > 0 && port <= 65535; }

}  // namespace

std::vector<SlotRange> parseClusterSlots(const redisReply& reply, const std::string& askedHost,
                                         const std::string& where) {
  if (reply.type != REDIS_REPLY_ARRAY) malformed(where, "not an array");
  std::vector<SlotRange> ranges;
  ranges.reserve(reply.elements);
  for (std::size_t i = 0; i < reply.elements; ++i) {
    const redisReply* entry = reply.element[i];
    // [first, last, [host, port, id, ...], replicas...]
    if (entry == nullptr || entry->type != REDIS_REPLY_ARRAY || entry->elements < 3) {
      malformed(where, "entry " + std::to_string(i) + " is not [first, last, master, ...]");
    }
    const redisReply* first = entry->element[0];
    const redisReply* last = entry->element[1];
    const redisReply* master = entry->element[2];
    if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER || first->integer < 0 ||
        last->integer < first->integer || last->integer >= kClusterSlots) {
      malformed(where, "entry " + std::to_string(i) + " has no valid slot range");
    }
    if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 || master->element[0]->type != REDIS_REPLY_STRING ||
        master->element[1]->type != REDIS_REPLY_INTEGER || !validPort(master->element[1]->integer)) {
      malformed(where, "entry " + std::to_string(i) + " has no valid master address");
    }
    std::string host(replyText(*master->element[0]));
    if (host == "?") continue;  // the node does not know the master's address yet
    if (host.empty()) host = askedHost;
    SlotRange range;
    range.first = static_cast<std::uint16_t>(first->integer);
    range.last = static_cast<std::uint16_t>(last->integer);
    range.master = NodeAddress{std::move(host), static_cast<int>(master->element[1]->integer)};
    ranges.push_back(std::move(range));
  }
  return ranges;
}

std::optional<Redirect> parseRedirect(const redisReply& reply, const std::string& replyingHost) {
  if (reply.type != REDIS_REPLY_ERROR) return std::nullopt;
  return parseRedirect(replyText(reply), replyingHost);
}

std::optional<Redirect> parseRedirect(std::string_view text, const std::string& replyingHost) {
  Redirect redirect;
  if (text.substr(0, 6) == "MOVED ") {
    redirect.ask = false;
  } else if (text.substr(0, 4) == "ASK ") {
    redirect.ask = true;
  } else {
    return std::nullopt;
  }
  // "MOVED 3999 127.0.0.1:6381"
  const auto firstSpace = text.find(' ');
  const auto secondSpace = text.find(' ', firstSpace + 1);
  if (secondSpace == std::string_view::npos) return std::nullopt;
  const auto slot = toInteger(text.substr(firstSpace + 1, secondSpace - firstSpace - 1));
  const std::string_view address = text.substr(secondSpace + 1);
  const auto colon = address.rfind(':');
  if (!slot || *slot < 0 || *slot >= kClusterSlots || colon == std::string_view::npos) return std::nullopt;
  const auto port = toInteger(address.substr(colon + 1));
  if (!port || !validPort(*port)) return std::nullopt;
  redirect.slot = static_cast<std::uint16_t>(*slot);
  redirect.target.host = colon == 0 ? replyingHost : std::string(address.substr(0, colon));
  redirect.target.port = static_cast<int>(*port);
  return redirect;
}

}  // namespace dlock::detail
