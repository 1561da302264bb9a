// SPDX-License-Identifier: Apache-2.0
#include "ServerObserver.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <chrono>

#include "redis/src/KeyNames.h"

namespace dlock::nemesis {
namespace {

struct ContextDeleter {
  void operator()(redisContext* context) const noexcept { redisFree(context); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One quoted argument from `at` (on its opening quote): Redis's sdscatrepr escapes.
std::optional<std::string> quoted(const std::string& line, std::size_t& at) {
  std::string out;
  for (++at; at < line.size(); ++at) {
    const char c = line[at];
    if (c == '"') {
      ++at;
      return out;
    }
    if (c != '\\' || at + 1 >= line.size()) {
      out += c;
      continue;
    }
    const char e = line[++at];
    switch (e) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'x':
        if (at + 2 < line.size() && hexValue(line[at + 1]) >= 0 && hexValue(line[at + 2]) >= 0) {
          out += static_cast<char>(hexValue(line[at + 1]) * 16 + hexValue(line[at + 2]));
          at += 2;
        }
        break;
      default: out += e;
    }
  }
  return std::nullopt;
}

// This host's wall clock minus its monotonic one, now (read at each line: NTP slews the wall
// clock, and a run is long enough for a fixed offset to drift by milliseconds).
std::int64_t wallMinusMonotonicNs(std::int64_t monotonicNow) {
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  return (static_cast<std::int64_t>(wall.tv_sec) * 1'000'000'000 + wall.tv_nsec) - monotonicNow;
}

}  // namespace

std::optional<MonitorLine> parseMonitorLine(const std::string& line) {
  // <seconds>.<micros> [<db> <client>] "CMD" "arg" ...
  const auto bracket = line.find("] ");
  const auto dot = line.find('.');
  if (line.empty() || !std::isdigit(static_cast<unsigned char>(line.front())) || bracket == std::string::npos ||
      dot == std::string::npos || dot > bracket) {
    return std::nullopt;
  }
  MonitorLine parsed;
  const auto open = line.find(' ', dot);  // "<stamp> [<db> <client>]"
  if (open != std::string::npos && line.find(' ', open + 1) != std::string::npos && line.find(' ', open + 1) < bracket) {
    parsed.client = line.substr(line.find(' ', open + 1) + 1, bracket - line.find(' ', open + 1) - 1);
  }
  parsed.fromScript = parsed.client == "lua";
  try {
    parsed.wallUs = std::stoll(line.substr(0, dot)) * 1'000'000 + std::stoll(line.substr(dot + 1, 6));
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
  std::vector<std::string>& args = parsed.args;
  std::size_t at = bracket + 2;
  while (at < line.size()) {
    if (line[at] == ' ') {
      ++at;
      continue;
    }
    if (line[at] != '"') return std::nullopt;
    auto arg = quoted(line, at);
    if (!arg) return std::nullopt;
    args.push_back(std::move(*arg));
  }
  if (args.empty()) return std::nullopt;
  return parsed;
}

ServerObserver::ServerObserver(std::vector<std::string> addresses, const std::vector<std::string>& keys,
                               const std::string& prefix, const std::string& historyPath)
    : writer_(historyPath) {
  for (const auto& key : keys) {
    names_.emplace_back(detail::KeyNames(prefix, key, false).lock(), key);
    names_.emplace_back(detail::KeyNames(prefix, key, true).lock(), key);
    for (const bool sharded : {false, true}) {
      const detail::KeyNames names(prefix, key, sharded);
      queues_.emplace_back(names.fairQueue(), key);
      leases_.emplace_back(names.fairLeases(), key);
      const std::string marker = "\x01";
      const std::string record = names.releaseRecord(marker);
      const auto at = record.find(marker);
      records_.push_back({record.substr(0, at), record.substr(at + marker.size()), key});
    }
  }
  addresses_ = addresses;
  for (const auto& address : addresses_) threads_.emplace_back([this, address] { watch(address); });
}

ServerObserver::~ServerObserver() {
  stopping_ = true;
  for (auto& thread : threads_) thread.join();
}

void ServerObserver::watch(const std::string& address) {
  const auto colon = address.rfind(':');
  const std::string host = address.substr(0, colon);
  const int port = std::stoi(address.substr(colon + 1));
  // A quiet second ends the connection too (hiredis: a context that reported an error is not
  // reused); a live workload is never quiet that long, and stopping_ is seen within it.
  const timeval timeout{1, 0};
  Stream stream;
  while (!stopping_) {
    ContextPtr context(redisConnectWithTimeout(host.c_str(), port, timeout));
    if (!context || context->err) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;  // down or restarting: try again
    }
    redisSetTimeout(context.get(), timeout);
    if (redisAppendCommand(context.get(), "MONITOR") != REDIS_OK) continue;
    stream.gap = true;  // what ran before this connection is unseen
    while (!stopping_) {
      void* raw = nullptr;
      if (redisGetReply(context.get(), &raw) != REDIS_OK) break;
      auto* reply = static_cast<redisReply*>(raw);
      if (reply->type == REDIS_REPLY_STATUS && reply->str != nullptr) {
        ++lines_;
        if (auto line = parseMonitorLine(std::string(reply->str, reply->len))) {
          if (!line->fromScript) stream.caller = *line;
          record(address, *line, stream);
        }
      }
      freeReplyObject(reply);
    }
  }
}

bool ServerObserver::recordQueue(const std::string& name, const std::vector<std::string>& command, Op record) {
  // RPUSH queue entry, LREM queue 1 entry, ZREM leases entry, ZADD leases expiry entry (a place
  // joined or renewed: its lease's end, in the server's ms); an entry is `token|ttl`.
  const bool push = name == "RPUSH" && command.size() == 3;
  const bool remove = name == "LREM" && command.size() == 4;
  const bool unqueue = name == "ZREM" && command.size() == 3;
  const bool renew = name == "ZADD" && command.size() == 4;
  if (!push && !remove && !unqueue && !renew) return false;
  const auto& names = unqueue || renew ? leases_ : queues_;
  for (const auto& [redisKey, key] : names) {
    if (command[1] != redisKey) continue;
    const std::string& entry = command.back();
    record.op = push ? "server-enqueue" : remove ? "server-leave" : unqueue ? "server-unqueue" : "server-place-lease";
    record.key = key;
    record.value = entry.substr(0, entry.find('|'));
    if (renew) record.token = std::strtoull(command[2].c_str(), nullptr, 10);  // the place's end, server ms
    writer_.append(std::move(record));
    return true;
  }
  return false;
}

bool ServerObserver::recordTombstone(const std::string& name, const std::vector<std::string>& command, Op record) {
  if (name != "SET" || command.size() < 3 || command[2] != "0") return false;
  const std::string& redisKey = command[1];
  for (const auto& [before, after, key] : records_) {
    if (redisKey.size() <= before.size() + after.size() || redisKey.compare(0, before.size(), before) != 0 ||
        redisKey.compare(redisKey.size() - after.size(), after.size(), after) != 0) {
      continue;
    }
    record.op = "server-tombstone";
    record.key = key;
    record.value = redisKey.substr(before.size(), redisKey.size() - before.size() - after.size());
    writer_.append(std::move(record));
    return true;
  }
  return false;
}

void ServerObserver::record(const std::string& address, const MonitorLine& line, Stream& stream) {
  const MonitorLine& caller = stream.caller;
  bool& gap = stream.gap;
  const std::vector<std::string>& command = line.args;
  const std::int64_t now = monotonicNs();
  // On this host's clock: the server's stamp, unless its clock was moved (a clock fault); then
  // the moment the line was read, tens of ms late but in the stream's order.
  const std::int64_t stamped = line.wallUs * 1000 - wallMinusMonotonicNs(now);
  const bool serverTimed = stamped <= now + 1'000'000 && stamped >= now - 10'000'000'000;
  if (serverTimed != stream.serverTimed) gap = true;
  stream.serverTimed = serverTimed;
  Op record;
  record.process = "server";
  record.kind = Kind::Info;
  record.timeNs = serverTimed ? stamped : now;
  if (gap) {
    // Whatever ran unseen (before a connection) may have changed any key, and a moved clock
    // times the lines differently: the checker judges this server's keys afresh from here.
    Op marker = record;
    marker.op = "server-watch";
    marker.message = address;
    writer_.append(std::move(marker));
    gap = false;
  }
  // A replica's stream from its master (straight or through a proxy) is not what this server ran
  // as a master; where there are several servers, only scripts' commands count (dlock writes its
  // keys only from scripts, and a master link replays them as plain commands).
  const bool plainCounts =
      addresses_.size() == 1 && std::find(addresses_.begin(), addresses_.end(), line.client) == addresses_.end();
  if (command.size() < 2 || (!line.fromScript && !plainCounts)) return;
  const MonitorLine& by = line.fromScript ? caller : line;
  record.message = address + " " + std::to_string((line.wallUs - by.wallUs) * 1000) + " " +
                   std::to_string(line.wallUs) + " " + (serverTimed ? "h" : "r") + " |";
  for (const std::string& arg : by.args) record.message += " " + arg;
  std::string name = command[0];
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (recordQueue(name, command, record) || recordTombstone(name, command, record)) return;
  const char* op = name == "SET" && command.size() >= 3       ? "server-set"
                   : name == "DEL"                            ? "server-del"
                   : name == "PEXPIRE" && command.size() >= 3 ? "server-expire"
                                                              : nullptr;
  if (op == nullptr) return;
  for (const auto& [redisKey, key] : names_) {
    if (command[1] != redisKey) continue;
    record.op = op;
    record.key = key;
    if (name == "SET") {
      record.value = command[2];
      for (std::size_t i = 3; i + 1 < command.size(); ++i) {
        std::string option = command[i];
        for (char& c : option) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (option == "PX") record.token = std::strtoull(command[i + 1].c_str(), nullptr, 10);
      }
    } else if (name == "PEXPIRE") {
      record.value = command[2];
    }
    writer_.append(std::move(record));
    return;
  }
}

}  // namespace dlock::nemesis
