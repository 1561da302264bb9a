// SPDX-License-Identifier: Apache-2.0
#include "QueueReplies.h"

#include <algorithm>

#include "Errors.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock::detail {

using std::chrono::milliseconds;

[[noreturn]] void unexpectedReply(const std::string& where, const std::string& what) {
  throw BackendError("dlock: " + where + ": unexpected reply: " + what);
}

std::string describeCall(const char* operation, std::string_view key, const std::string& node) {
  return std::string(operation) + " " + quoteKey(key) + " on " + node;
}

bool parseDecimal(std::string_view text, std::uint64_t max, std::uint64_t& value) {
  if (text.empty() || text.size() > 19 || (text.size() > 1 && text.front() == '0')) return false;
  value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value <= max;
}

std::string_view textOf(const redisReply& element) { return std::string_view(element.str, element.len); }

const redisReply& arrayOf(const redisReply& reply, std::size_t size, const std::string& where) {
  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != size || reply.element == nullptr) {
    unexpectedReply(where, "expected an array of " + std::to_string(size) + " elements");
  }
  return reply;
}

long long integerAt(const redisReply& reply, std::size_t index, const std::string& where) {
  const redisReply* element = reply.element[index];
  if (element == nullptr || element->type != REDIS_REPLY_INTEGER) {
    unexpectedReply(where, "element " + std::to_string(index) + " is not an integer");
  }
  return element->integer;
}

std::uint64_t decimalAt(const redisReply& reply, std::size_t index, std::uint64_t max, const std::string& where) {
  const redisReply* element = reply.element[index];
  std::uint64_t value = 0;
  if (element == nullptr || element->type != REDIS_REPLY_STRING || !parseDecimal(textOf(*element), max, value)) {
    unexpectedReply(where, "element " + std::to_string(index) + " is not a number from 0 to " + std::to_string(max));
  }
  return value;
}

FairAcquireResult readQueueAcquireReply(const redisReply& raw, const std::string& where, std::uint64_t minFence) {
  const redisReply& reply = arrayOf(raw, 4, where);
  FairAcquireResult result;
  const long long status = integerAt(reply, 0, where);
  result.backendMillis = static_cast<std::int64_t>(decimalAt(reply, 2, kMaxFencingToken, where));
  const long long fourth = integerAt(reply, 3, where);
  if (status == 1) {
    result.acquired = true;
    result.fencingToken = decimalAt(reply, 1, kMaxFencingToken, where);
    if (result.fencingToken < minFence) unexpectedReply(where, "a fencing token of " + std::to_string(result.fencingToken));
    // Ours already: what is left of the lease (0, the whole ttl, for a fresh acquisition). A lease
    // in its last millisecond leaves 1, never "the whole ttl".
    result.validity = milliseconds(fourth > 0 ? fourth : 0);
    if (fourth < 0) unexpectedReply(where, "a negative validity");
  } else if (status == 0) {
    const long long pttl = integerAt(reply, 1, where);
    result.holderTtl = milliseconds(pttl > 0 ? pttl : 0);
    result.position = static_cast<std::uint32_t>(std::clamp<long long>(fourth, 0, 1LL << 30));
  } else {
    unexpectedReply(where, "status " + std::to_string(status));
  }
  return result;
}

ReleaseResult readQueueReleaseReply(const redisReply& raw, const std::string& where, long long maxAdmitted) {
  const redisReply& reply = arrayOf(raw, 2, where);
  const long long status = integerAt(reply, 0, where);
  const long long handed = integerAt(reply, 1, where);
  if (status < 0 || status > 2 || handed < 0 || handed > maxAdmitted || (status != 1 && handed != 0)) {
    unexpectedReply(where, "status " + std::to_string(status));
  }
  ReleaseResult result;
  result.released = status != 0;
  result.releasedEarlier = status == 2;
  result.notified = static_cast<std::uint32_t>(handed);
  return result;
}

}  // namespace dlock::detail
