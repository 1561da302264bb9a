// redlock://[user:pass@]h1:p1,h2:p2,...[?opts]: one redis:// node per host, node_timeout for all.
// redlock://<uri>;<uri>;...: one node per member URI; node_timeout in a member's query is that
// node's (a redis:// member's default timeouts too), and the redlock waits for the slowest one's.
#include <algorithm>

#include "dlock/LockError.h"
#include "dlock/redlock/RedlockOperator.h"
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {
namespace {

constexpr UriOption kNodeTimeout{"node_timeout", UriOptionType::Duration,
                                 "how long the redlock waits for a node; a node's default timeouts"};

std::shared_ptr<IOperator> connectRedlock(const ParsedUri& uri, NodeTimeout) {
  RedlockOptions options;
  std::vector<std::shared_ptr<IOperator>> members;
  if (uri.members.empty()) {
    options.nodeTimeout = durationOf(uri, kNodeTimeout, options.nodeTimeout);
    for (const auto& host : uri.hosts) members.push_back(connectRedisNode(uri, host, options.nodeTimeout));
  } else {
    std::chrono::milliseconds slowest{0};
    for (const ParsedUri& member : uri.members) {
      const auto nodeTimeout = durationOf(member, kNodeTimeout, RedlockOptions().nodeTimeout);
      slowest = std::max(slowest, nodeTimeout);
      members.push_back(connectParsed(member, nodeTimeout));
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
    return std::make_shared<RedlockOperator>(std::move(members), options);
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
