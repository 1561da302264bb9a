// SPDX-License-Identifier: Apache-2.0
#include "Replies.h"

#include <algorithm>

#include "Errors.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock::detail {
namespace {

[[noreturn]] void unexpected(const ReplySource& where, const std::string& what) {
  throw BackendError("dlock: " + where.text() + ": unexpected reply: " + what);
}

void checkNotError(const redisReply& reply, const ReplySource& where) {
  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where.text());
}

// A fencing counter as Redis stores it: decimal digits, no sign, no leading zero, 1 to 2^63 - 1
// (a Redis integer). Anything else is the server's or someone else's data, never a token.
std::uint64_t fenceFrom(const redisReply* element, const ReplySource& where, const char* what) {
  if (element == nullptr || (element->type != REDIS_REPLY_STRING && element->type != REDIS_REPLY_STATUS)) {
    unexpected(where, std::string(what) + " is not text");
  }
  const std::string_view text(element->str, element->len);
  constexpr std::string_view kMax = "9223372036854775807";
  const bool digits = !text.empty() && text.size() <= kMax.size() && text.front() != '0' &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || (text.size() == kMax.size() && text > kMax)) {
    unexpected(where, std::string(what) + " is not a counter from 1 to 2^63 - 1");
  }
  std::uint64_t value = 0;
  for (const char c : text) value = value * 10 + static_cast<std::uint64_t>(c - '0');
  return value;
}

long long integerAt(const redisReply& reply, std::size_t index, const ReplySource& where) {
  const redisReply* element = reply.element[index];
  if (element == nullptr || element->type != REDIS_REPLY_INTEGER) {
    unexpected(where, "element " + std::to_string(index) + " is not an integer");
  }
  return element->integer;
}

const redisReply& pairOf(const redisReply& reply, const ReplySource& where) {
  checkNotError(reply, where);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 || reply.element == nullptr) {
    unexpected(where, "expected an array of two elements");
  }
  return reply;
}

// "since-µs\nlabel", the tail of an owner record (Scripts.h): the label is any bytes.
void readOwnerRecord(const redisReply* element, const ReplySource& where, LeaseInfo& info) {
  if (element == nullptr || element->type != REDIS_REPLY_STRING) unexpected(where, "the owner record is not text");
  const std::string_view text(element->str, element->len);
  const auto end = text.find('\n');
  const std::string_view since = text.substr(0, end);
  constexpr std::size_t kMaxDigits = 18;  // µs since 1970, far past this century
  if (end == std::string_view::npos || since.empty() || since.size() > kMaxDigits ||
      !std::all_of(since.begin(), since.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    unexpected(where, "the owner record has no time");
  }
  long long micros = 0;
  for (const char c : since) micros = micros * 10 + (c - '0');
  info.ownerSince = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::microseconds(micros)));
  info.owner = std::string(text.substr(end + 1));
}

}  // namespace

std::string ReplySource::text() const {
  if (text_ != nullptr) return *text_;
  return std::string(operation_) + " " + quoteKey(key_) + " on " + std::string(address_);
}

AcquireResult readAcquireReply(const redisReply& raw, const ReplySource& where) {
  const redisReply& reply = pairOf(raw, where);
  const long long status = integerAt(reply, 0, where);
  AcquireResult result;
  if (status == 1) {
    result.acquired = true;
    result.fencingToken = fenceFrom(reply.element[1], where, "the fencing token");
  } else if (status == 0) {
    // PTTL: -1 (no expiry: not one of ours) and -2 (vanished meanwhile) give no bound.
    const long long value = integerAt(reply, 1, where);
    result.holderTtl = std::chrono::milliseconds(value > 0 ? value : 0);
  } else {
    unexpected(where, "status " + std::to_string(status));
  }
  return result;
}

ReleaseResult readReleaseReply(const redisReply& raw, const ReplySource& where) {
  const redisReply& reply = pairOf(raw, where);
  const long long status = integerAt(reply, 0, where);
  const long long notified = integerAt(reply, 1, where);
  if (status < 0 || status > 2 || notified < 0 || (status != 1 && notified != 0)) {
    unexpected(where, "status " + std::to_string(status));
  }
  ReleaseResult result;
  result.released = status != 0;
  result.releasedEarlier = status == 2;
  result.notified = static_cast<std::uint32_t>(std::min<long long>(notified, 1 << 30));
  return result;
}

bool readFlagReply(const redisReply& reply, const ReplySource& where) {
  checkNotError(reply, where);
  if (reply.type != REDIS_REPLY_INTEGER || (reply.integer != 0 && reply.integer != 1)) {
    unexpected(where, "expected 0 or 1");
  }
  return reply.integer == 1;
}

std::vector<bool> readFlagsReply(const redisReply& reply, std::size_t count, const ReplySource& where) {
  checkNotError(reply, where);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != count || (count > 0 && reply.element == nullptr)) {
    unexpected(where, "expected an array of " + std::to_string(count) + " integers");
  }
  std::vector<bool> flags;
  flags.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const long long value = integerAt(reply, i, where);
    if (value != 0 && value != 1) unexpected(where, "element " + std::to_string(i) + " is not 0 or 1");
    flags.push_back(value == 1);
  }
  return flags;
}

std::uint64_t readCountReply(const redisReply& reply, const ReplySource& where) {
  checkNotError(reply, where);
  if (reply.type != REDIS_REPLY_INTEGER || reply.integer < 0) unexpected(where, "expected a non-negative integer");
  return static_cast<std::uint64_t>(reply.integer);
}

LeaseInfo readInspectReply(const redisReply& raw, const ReplySource& where) {
  checkNotError(raw, where);
  const bool recorded = raw.type == REDIS_REPLY_ARRAY && raw.elements == 3 && raw.element != nullptr;
  if (!recorded) (void)pairOf(raw, where);
  const redisReply& reply = raw;
  const long long pttl = integerAt(reply, 0, where);
  const redisReply* fence = reply.element[1];
  LeaseInfo info;
  info.held = pttl > 0 || pttl == -1;  // -1: present without expiry (not written by dlock)
  info.remaining = std::chrono::milliseconds(pttl > 0 ? pttl : 0);
  const bool none = fence != nullptr && fence->type == REDIS_REPLY_STRING && std::string_view(fence->str, fence->len) == "0";
  info.fencingToken = none ? 0 : fenceFrom(fence, where, "the fencing counter");
  if (recorded && info.held) readOwnerRecord(reply.element[2], where, info);
  return info;
}

std::uint64_t readFenceReply(const redisReply& reply, const ReplySource& where) {
  checkNotError(reply, where);
  return fenceFrom(&reply, where, "the fencing counter");
}

}  // namespace dlock::detail
