// SPDX-License-Identifier: Apache-2.0
#include "KeyScan.h"

#include <hiredis/hiredis.h>

#include <memory>

#include "FencedStore.h"

namespace dlock::nemesis {
namespace {

struct ContextDeleter {
  void operator()(redisContext* context) const noexcept { redisFree(context); }
};
struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

ReplyPtr run(redisContext& context, const std::vector<std::string>& args, const std::string& address) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(&context, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (!reply) throw StoreError("scan: " + args.front() + " on " + address + ": " + context.errstr);
  if (reply->type == REDIS_REPLY_ERROR) throw StoreError("scan: " + args.front() + " on " + address + ": " + reply->str);
  return reply;
}

}  // namespace

std::vector<std::string> keysWithoutTtl(const std::string& address, const std::string& pattern,
                                        std::chrono::milliseconds wait) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw StoreError("scan: '" + address + "' is not host:port");
  const timeval timeout{static_cast<time_t>(wait.count() / 1000), static_cast<suseconds_t>((wait.count() % 1000) * 1000)};
  std::unique_ptr<redisContext, ContextDeleter> context(
      redisConnectWithTimeout(address.substr(0, colon).c_str(), std::stoi(address.substr(colon + 1)), timeout));
  if (!context || context->err) {
    throw StoreError("scan: cannot connect to " + address + ": " + (context ? context->errstr : "out of memory"));
  }
  redisSetTimeout(context.get(), timeout);
  std::vector<std::string> found;
  std::string cursor = "0";
  do {
    const ReplyPtr page = run(*context, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, address);
    if (page->type != REDIS_REPLY_ARRAY || page->elements != 2) throw StoreError("scan: odd SCAN reply from " + address);
    cursor.assign(page->element[0]->str, page->element[0]->len);
    const redisReply& keys = *page->element[1];
    for (size_t i = 0; i < keys.elements; ++i) {
      std::string key(keys.element[i]->str, keys.element[i]->len);
      // -1: no TTL; -2: gone since the SCAN saw it.
      if (run(*context, {"PTTL", key}, address)->integer == -1) found.push_back(std::move(key));
    }
  } while (cursor != "0");
  return found;
}

}  // namespace dlock::nemesis
