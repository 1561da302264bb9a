// SPDX-License-Identifier: Apache-2.0
#include "MasterResolver.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "redis/src/Connection.h"
#include "redis/src/Errors.h"
#include "redis/src/Reply.h"
#include "dlock/LockError.h"

namespace dlock::detail {
namespace {

std::string joinAddresses(const std::vector<SentinelAddress>& sentinels) {
  std::string list;
  for (const auto& sentinel : sentinels) {
    if (!list.empty()) list += ",";
    list += sentinel.address();
  }
  return list;
}

// What one resolution learnt, for the message when it finds nothing.
struct Findings {
  std::string text;
  bool anyReachable = false;  // some node gave an answer that may change (unknown master, not a master)
  bool anyRefused = false;    // some node refused our credentials or commands

  void add(const std::string& what) { text += (text.empty() ? "" : "; ") + what; }

  // An error reply from `who`: a node not ready now (LOADING, ...) or one refusing us.
  void addErrorReply(const std::string& who, const redisReply& reply) {
    (isTransientErrorReply(reply) ? anyReachable : anyRefused) = true;
    add(who + std::string(replyText(reply)));
  }
};

// True when `master` says ROLE master; otherwise notes why not. BackendError from AUTH (the data
// credentials are wrong) is noted as a refusal.
bool confirmMaster(const ConnectionOptions& options, Findings& findings) {
  const std::string address = options.address();
  try {
    Connection connection(options);
    const ReplyPtr reply = connection.command({"ROLE"});
    if (reply->type == REDIS_REPLY_ERROR) {
      findings.addErrorReply(address + " answered ROLE with ", *reply);
      return false;
    }
    findings.anyReachable = true;
    const std::string_view role = roleIn(*reply);
    if (role == "master") return true;
    findings.add(address + (role.empty() ? " answered ROLE with an unexpected reply"
                                         : " is a " + std::string(role) + ", not a master"));
    return false;
  } catch (const BackendError& error) {
    findings.anyRefused = true;
    findings.add(error.what());
  } catch (const ConnectionError& error) {
    findings.add(error.what());
  }
  return false;
}

}  // namespace

bool toMasterAddress(std::string_view host, std::string_view port, MasterAddress& out) {
  int value = 0;
  const char* end = port.data() + port.size();
  const auto [ptr, ec] = std::from_chars(port.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 1 || value > 65535 || host.empty()) return false;
  out.host = std::string(host);
  out.port = value;
  return true;
}

std::string_view roleIn(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 1 || reply.element[0]->type != REDIS_REPLY_STRING) return {};
  return replyText(*reply.element[0]);
}

MasterResolver::MasterResolver(std::vector<SentinelAddress> sentinels, std::string masterName,
                               ConnectionOptions sentinel, ConnectionOptions data)
    : masterName_(std::move(masterName)),
      sentinel_(std::move(sentinel)),
      data_(std::move(data)),
      configured_(std::move(sentinels)),
      sentinelList_(joinAddresses(configured_)),
      order_(configured_) {}

MasterResolver::~MasterResolver() = default;

ConnectionOptions MasterResolver::sentinelOptions(const SentinelAddress& sentinel) const {
  ConnectionOptions options = sentinel_;
  options.host = sentinel.host;
  options.port = sentinel.port;
  options.db = 0;
  return options;
}

ConnectionOptions MasterResolver::dataOptions(const MasterAddress& master) const {
  ConnectionOptions options = data_;
  options.host = master.host;
  options.port = master.port;
  return options;
}

std::vector<ConnectionOptions> MasterResolver::sentinels() const {
  std::vector<ConnectionOptions> all;
  all.reserve(configured_.size());
  for (const auto& sentinel : configured_) all.push_back(sentinelOptions(sentinel));
  return all;
}

MasterAddress MasterResolver::resolve(const std::vector<MasterAddress>& stale) {
  std::vector<SentinelAddress> order;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    order = order_;
  }
  Findings findings;
  std::vector<MasterAddress> unconfirmed;
  for (const auto& sentinel : order) {
    const std::string where = "sentinel " + sentinel.address();
    MasterAddress named;
    try {
      Connection connection(sentinelOptions(sentinel));
      const ReplyPtr reply = connection.command({"SENTINEL", "get-master-addr-by-name", masterName_});
      if (reply->type == REDIS_REPLY_NIL) {
        findings.anyReachable = true;
        findings.add(where + " does not know master '" + masterName_ + "'");
        continue;
      }
      if (reply->type == REDIS_REPLY_ERROR) {
        findings.addErrorReply(where + ": ", *reply);
        continue;
      }
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
          reply->element[1]->type != REDIS_REPLY_STRING ||
          !toMasterAddress(replyText(*reply->element[0]), replyText(*reply->element[1]), named)) {
        findings.anyReachable = true;
        findings.add(where + ": unexpected reply to SENTINEL get-master-addr-by-name");
        continue;
      }
    } catch (const BackendError& error) {  // AUTH refused by the sentinel
      findings.anyRefused = true;
      findings.add(error.what());
      continue;
    } catch (const ConnectionError& error) {
      findings.add(error.what());
      continue;
    }
    if (std::find(unconfirmed.begin(), unconfirmed.end(), named) != unconfirmed.end()) continue;
    if (std::find(stale.begin(), stale.end(), named) != stale.end()) {
      findings.anyReachable = true;
      findings.add(where + " still names " + named.address() + ", which is being failed over");
      continue;
    }
    if (confirmMaster(dataOptions(named), findings)) {
      std::lock_guard<std::mutex> guard(mutex_);
      const auto it = std::find_if(order_.begin(), order_.end(), [&](const SentinelAddress& candidate) {
        return candidate.host == sentinel.host && candidate.port == sentinel.port;
      });
      if (it != order_.end()) std::rotate(order_.begin(), it, it + 1);
      return named;
    }
    unconfirmed.push_back(named);
  }
  const std::string message = "dlock: no master '" + masterName_ + "' confirmed by the sentinels " + sentinelList_ +
                              ": " + findings.text;
  // Refusals alone (a wrong password, a missing ACL permission) will not pass by waiting.
  if (findings.anyRefused && !findings.anyReachable) throw BackendError(message);
  throw ConnectionError(message);
}

}  // namespace dlock::detail
