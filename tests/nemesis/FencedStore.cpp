// SPDX-License-Identifier: Apache-2.0
#include "FencedStore.h"

#include <hiredis/hiredis.h>

namespace dlock::nemesis {
namespace {

// The fenced write's decision: a token not lower than the last accepted one is accepted and
// recorded. The first write to a key is always accepted.
constexpr const char* kFenceDecision = R"lua(
local last = redis.call('GET', KEYS[1])
if last and tonumber(ARGV[1]) < tonumber(last) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[3], ARGV[1])
)lua";

const std::string& fencedWriteScript() {
  static const std::string script = std::string(kFenceDecision) + "return 1\n";
  return script;
}

// A leader's write of its term: accepted only above the last accepted term (ElectionWorker's
// fenced store): an equal term is refused too, so each term writes once.
constexpr const char* kTermWrite = R"lua(
local last = redis.call('GET', KEYS[1])
if last and tonumber(ARGV[1]) <= tonumber(last) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[3], ARGV[1])
return 1
)lua";

// A fenced write of the bounded buffer: the decision, then the put (RPUSH, the peak raised) or the
// take (LREM of the item) and its record.
const std::string& bufferWriteScript() {
  static const std::string script = std::string(kFenceDecision) + R"lua(
if ARGV[2] == 'put' then
  local length = redis.call('RPUSH', KEYS[4], ARGV[3])
  if length > tonumber(redis.call('GET', KEYS[7]) or '0') then redis.call('SET', KEYS[7], length) end
  redis.call('RPUSH', KEYS[5], ARGV[3])
else
  redis.call('LREM', KEYS[4], 1, ARGV[3])
  redis.call('RPUSH', KEYS[6], ARGV[3])
end
return 1
)lua";
  return script;
}

// One act of a holder and the tally it moves, in one step of the store.
constexpr const char* kAct = R"lua(
redis.call('RPUSH', KEYS[1], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
if ARGV[1] == 'enter' then
  return redis.call('INCRBY', KEYS[2], ARGV[3])
end
return redis.call('DECRBY', KEYS[2], ARGV[3])
)lua";

std::string storeKey(const std::string& key, const char* role) { return "nemesis:{" + key + "}:" + role; }

long long toNumber(const std::string& text, const char* what) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::logic_error&) {
  }
  throw StoreError(std::string("store: ") + what + " is not a number: '" + text + "'");
}

}  // namespace

struct FencedStore::Reply {
  int type = 0;
  long long integer = 0;
  std::string str;
  std::vector<std::string> elements;  // array of strings only (LRANGE)
};

void FencedStore::ContextDeleter::operator()(redisContext* context) const noexcept { redisFree(context); }

FencedStore::FencedStore(const std::string& address, std::chrono::milliseconds timeout) : timeout_(timeout) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) throw StoreError("store: '" + address + "' is not host:port");
  host_ = address.substr(0, colon);
  port_ = static_cast<int>(toNumber(address.substr(colon + 1), "the port"));
}

FencedStore::~FencedStore() = default;

redisContext& FencedStore::connection() {
  if (context_) return *context_;
  const timeval tv{static_cast<time_t>(timeout_.count() / 1000), static_cast<suseconds_t>((timeout_.count() % 1000) * 1000)};
  context_.reset(redisConnectWithTimeout(host_.c_str(), port_, tv));
  if (!context_ || context_->err) {
    const std::string why = context_ ? context_->errstr : "out of memory";
    context_.reset();
    throw StoreError("store: cannot connect to " + host_ + ":" + std::to_string(port_) + ": " + why);
  }
  redisSetTimeout(context_.get(), tv);
  return *context_;
}

FencedStore::Reply FencedStore::command(const std::vector<std::string>& args) {
  redisContext& context = connection();
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  auto* raw = static_cast<redisReply*>(
      redisCommandArgv(&context, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  if (raw == nullptr) {
    // hiredis: a context that reported an error is not reused.
    const std::string why = context.errstr;
    context_.reset();
    throw StoreError("store: " + args.front() + " on " + host_ + ":" + std::to_string(port_) + ": " + why);
  }
  Reply reply;
  reply.type = raw->type;
  reply.integer = raw->integer;
  if (raw->str != nullptr) reply.str.assign(raw->str, raw->len);
  for (size_t i = 0; i < raw->elements; ++i) {
    const redisReply* element = raw->element[i];
    reply.elements.emplace_back(element->str != nullptr ? std::string(element->str, element->len)
                                                        : std::to_string(element->integer));
  }
  freeReplyObject(raw);
  if (reply.type == REDIS_REPLY_ERROR) throw StoreError("store: " + args.front() + ": " + reply.str);
  return reply;
}

bool FencedStore::write(const std::string& key, std::uint64_t token) {
  const Reply reply = command({"EVAL", fencedWriteScript(), "3", storeKey(key, "fence-last"), storeKey(key, "fence-count"),
                               storeKey(key, "fence-tokens"), std::to_string(token)});
  if (reply.type != REDIS_REPLY_INTEGER) throw StoreError("store: the fenced write gave no integer");
  return reply.integer == 1;
}

bool FencedStore::writeTerm(const std::string& key, std::uint64_t term) {
  const Reply reply = command({"EVAL", kTermWrite, "3", storeKey(key, "fence-last"), storeKey(key, "fence-count"),
                               storeKey(key, "fence-tokens"), std::to_string(term)});
  if (reply.type != REDIS_REPLY_INTEGER) throw StoreError("store: the term's write gave no integer");
  return reply.integer == 1;
}

long long FencedStore::bufferLength(const std::string& key) { return command({"LLEN", storeKey(key, "buffer")}).integer; }

std::string FencedStore::bufferHead(const std::string& key) {
  const Reply head = command({"LINDEX", storeKey(key, "buffer"), "0"});
  return head.type == REDIS_REPLY_NIL ? std::string() : head.str;
}

bool FencedStore::bufferPut(const std::string& key, std::uint64_t token, const std::string& item) {
  return bufferWrite(key, token, "put", item);
}

bool FencedStore::bufferTake(const std::string& key, std::uint64_t token, const std::string& item) {
  return bufferWrite(key, token, "take", item);
}

bool FencedStore::bufferWrite(const std::string& key, std::uint64_t token, const char* action, const std::string& item) {
  const Reply reply = command({"EVAL", bufferWriteScript(), "7", storeKey(key, "fence-last"), storeKey(key, "fence-count"),
                               storeKey(key, "fence-tokens"), storeKey(key, "buffer"), storeKey(key, "put"),
                               storeKey(key, "taken"), storeKey(key, "peak"), std::to_string(token), action, item});
  if (reply.type != REDIS_REPLY_INTEGER) throw StoreError(std::string("store: the buffer's ") + action + " gave no integer");
  return reply.integer == 1;
}

long long FencedStore::act(const std::string& key, bool enter, const std::string& owner, std::uint32_t permits) {
  const Reply reply = command({"EVAL", kAct, "2", storeKey(key, "acts"), storeKey(key, "tally"), enter ? "enter" : "exit",
                               owner, std::to_string(permits)});
  if (reply.type != REDIS_REPLY_INTEGER) throw StoreError("store: the act gave no integer");
  return reply.integer;
}

std::uint64_t FencedStore::lastToken(const std::string& key) {
  const Reply last = command({"GET", storeKey(key, "fence-last")});
  if (last.type == REDIS_REPLY_NIL) return 0;
  return static_cast<std::uint64_t>(toNumber(last.str, "the last token"));
}

long long FencedStore::get(const std::string& key) {
  const Reply reply = command({"GET", storeKey(key, "counter")});
  if (reply.type == REDIS_REPLY_NIL) return 0;
  return toNumber(reply.str, "the counter");
}

void FencedStore::set(const std::string& key, long long value) {
  (void)command({"SET", storeKey(key, "counter"), std::to_string(value)});
}

std::map<std::string, StoreKeySnapshot> FencedStore::snapshot(const std::vector<std::string>& keys) {
  std::map<std::string, StoreKeySnapshot> result;
  for (const auto& key : keys) {
    StoreKeySnapshot& shot = result[key];
    for (const auto& token : command({"LRANGE", storeKey(key, "fence-tokens"), "0", "-1"}).elements) {
      shot.acceptedTokens.push_back(static_cast<std::uint64_t>(toNumber(token, "an accepted token")));
    }
    const Reply count = command({"GET", storeKey(key, "fence-count")});
    if (count.type != REDIS_REPLY_NIL) shot.acceptedCount = toNumber(count.str, "the accepted count");
    shot.lastToken = lastToken(key);
    shot.counter = get(key);
    shot.acts = command({"LRANGE", storeKey(key, "acts"), "0", "-1"}).elements;
    shot.put = command({"LRANGE", storeKey(key, "put"), "0", "-1"}).elements;
    shot.taken = command({"LRANGE", storeKey(key, "taken"), "0", "-1"}).elements;
    shot.buffer = command({"LRANGE", storeKey(key, "buffer"), "0", "-1"}).elements;
    const Reply peak = command({"GET", storeKey(key, "peak")});
    if (peak.type != REDIS_REPLY_NIL) shot.bufferPeak = toNumber(peak.str, "the buffer's peak");
  }
  return result;
}

}  // namespace dlock::nemesis
