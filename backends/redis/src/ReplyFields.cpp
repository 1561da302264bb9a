// SPDX-License-Identifier: Apache-2.0
#include "ReplyFields.h"

#include "Errors.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock::detail {

std::string describeCall(const char* operation, std::string_view key, const std::string& node) {
  return std::string(operation) + " " + quoteKey(key) + " on " + node;
}

void unexpectedReply(const std::string& where, const std::string& what) {
  throw BackendError("dlock: " + where + ": unexpected reply: " + what);
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

ReleaseResult readQueueReleaseReply(const redisReply& raw, long long maxAdmitted, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 2, where);
  const long long status = integerAt(reply, 0, where);
  const long long admitted = integerAt(reply, 1, where);
  if (status < 0 || status > 2 || admitted < 0 || admitted > maxAdmitted || (status != 1 && admitted != 0)) {
    unexpectedReply(where, "status " + std::to_string(status));
  }
  ReleaseResult result;
  result.released = status != 0;
  result.releasedEarlier = status == 2;
  result.notified = static_cast<std::uint32_t>(admitted);
  return result;
}

}  // namespace dlock::detail
