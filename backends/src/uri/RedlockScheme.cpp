// SPDX-License-Identifier: Apache-2.0
// redlock://[user:pass@]h1:p1,h2:p2,...[?opts]: one redis:// node per host, node_timeout for all.
// redlock://<uri>;<uri>;...: one node per member URI; node_timeout in a member's query is that
// node's (a redis:// member's default timeouts too), and the redlock waits for the slowest one's.
#include <algorithm>

#include "dlock/LockError.h"
#include "dlock/detail/Log.h"
#include "dlock/redlock/RedlockOperator.h"
#include "uri/Probe.h"
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {
namespace {

constexpr UriOption kNodeTimeout{"node_timeout", UriOptionType::Duration,
                                 "how long the redlock waits for a node; a node's default timeouts"};

// Checks the nodes as connect() checks one server, but as Redlock counts them: a node that refuses
// (a wrong password) is a mistake to fix now, while nodes that cannot be reached fail the connect
// only when they leave fewer than a quorum, which is what Redlock exists to survive.
void probeMembers(const ParsedUri& uri, const std::vector<std::shared_ptr<IOperator>>& members,
                  const std::vector<bool>& lazy) {
  const std::size_t quorum = members.size() / 2 + 1;
  std::size_t reachable = members.size();
  std::string unreachable;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (lazy[i]) continue;
    try {
      probe(*members[i]);
    } catch (const ConnectionError& error) {
      --reachable;
      unreachable += std::string(unreachable.empty() ? "" : "; ") + error.what();
    }
  }
  if (reachable < quorum) {
    throw ConnectionError("dlock: connect to " + uri.redacted + " failed: only " + std::to_string(reachable) + " of " +
                          std::to_string(members.size()) + " nodes answered, fewer than the quorum of " +
                          std::to_string(quorum) + ": " + unreachable);
  }
  if (!unreachable.empty()) logger()->warn("dlock: {} starts with nodes unreachable: {}", uri.redacted, unreachable);
}

std::shared_ptr<IOperator> connectRedlock(const ParsedUri& uri, NodeTimeout) {
  RedlockOptions options;
  std::vector<std::shared_ptr<IOperator>> members;
  std::vector<bool> lazy;  // per member: not checked in connect()
  if (uri.members.empty()) {
    options.nodeTimeout = durationOf(uri, kNodeTimeout, options.nodeTimeout);
    for (const auto& host : uri.hosts) {
      members.push_back(connectRedisNode(uri, host, options.nodeTimeout));
      lazy.push_back(lazyConnect(uri));
    }
  } else {
    std::chrono::milliseconds slowest{0};
    for (const ParsedUri& member : uri.members) {
      const auto nodeTimeout = durationOf(member, kNodeTimeout, RedlockOptions().nodeTimeout);
      slowest = std::max(slowest, nodeTimeout);
      lazy.push_back(lazyConnect(member) || lazyConnect(uri));
      ParsedUri unchecked = member;  // checked below, by the quorum's rule
      unchecked.options[std::string(kLazyConnect.name)] = "true";
      members.push_back(connectParsed(unchecked, nodeTimeout));
    }
    options.nodeTimeout = slowest;
  }
  std::vector<std::string> seen;
  for (const auto& member : members) {
    const std::string where = member->describe();
    if (where != "memory://" && std::find(seen.begin(), seen.end(), where) != seen.end()) {
      throw ConfigError("dlock: bad URI '" + uri.redacted + "': " + where + " appears twice in the redlock");
    }
    seen.push_back(where);
  }
  try {
    auto redlock = std::make_shared<RedlockOperator>(members, options);
    probeMembers(uri, members, lazy);  // once the set is known to be valid
    return redlock;
  } catch (const ConfigError& error) {
    std::string_view problem = error.what();
    if (problem.substr(0, 7) == "dlock: ") problem.remove_prefix(7);
    throw ConfigError("dlock: bad URI '" + uri.redacted + "': " + std::string(problem));
  }
}

}  // namespace

const UriScheme& redlockScheme() {
  static const UriScheme scheme = [] {
    UriScheme redlock;
    redlock.name = "redlock";
    redlock.options = withCommonOptions({kNodeTimeout});
    redlock.memberOptions = {kNodeTimeout};
    redlock.defaultPort = 6379;
    redlock.memberList = true;
    redlock.path = [](const UriParser& parser, std::string_view path, ParsedUri&) {
      if (!path.empty()) parser.fail("redlock:// takes no database; give member URIs instead");
    };
    redlock.connect = connectRedlock;
    return redlock;
  }();
  return scheme;
}

}  // namespace dlock::detail
