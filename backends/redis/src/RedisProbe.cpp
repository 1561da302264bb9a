// SPDX-License-Identifier: Apache-2.0
// RedisOperator::probe(): what dlock::connect() checks before it returns, so a wrong host, port,
// password, database or missing ACL permission shows at start-up with the fix, not at the first
// tryLock.
#include <hiredis/hiredis.h>

#include <string>
#include <string_view>
#include <vector>

#include "Connection.h"
#include "Errors.h"
#include "KeyNames.h"
#include "Permissions.h"
#include "RedisOperatorOptions.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {
namespace {

bool mentions(std::string_view text, std::string_view word) { return text.find(word) != std::string_view::npos; }

// What the user should change, for a refusal the server gave; empty when dlock cannot tell.
// `overUnix`: the URI is a unix:// one, which names its database as ?db=N. `rule`: the ACL rule
// granting what dlock runs (Permissions.h).
std::string fixForRefusal(std::string_view error, bool overUnix, const std::string& rule) {
  const bool auth = mentions(error, "NOAUTH") || mentions(error, "WRONGPASS") || mentions(error, "invalid password") ||
                    mentions(error, "invalid username-password");
  if (auth && mentions(error, "confirmed by the sentinels")) {  // the sentinels' refusal, not the master's
    return "the sentinels refused (NOAUTH or WRONGPASS): give their credentials as sentinel_password= (and "
           "sentinel_user=) in the URI";
  }
  if (mentions(error, "WRONGPASS") || mentions(error, "invalid password") ||
      mentions(error, "invalid username-password")) {
    return "the server refused the password (WRONGPASS): check user:password in the URI";
  }
  if (mentions(error, "NOAUTH")) {
    return "the server requires a password (NOAUTH): give it in the URI, redis://[user:]password@host:port";
  }
  if (mentions(error, "without any password configured")) {
    return "the server has no password set: leave user:password out of the URI, or set one on the server";
  }
  if (mentions(error, "NOPERM")) {
    return "the ACL user may not run a command dlock needs (NOPERM): grant it what dlock runs, scripts' inner "
           "commands included: ACL SETUSER <user> " + rule;
  }
  if (mentions(error, "DB index is out of range")) {
    return overUnix ? "the server has no such database: check db= in the URI (unix:///path/redis.sock?db=N)"
                : "the server has no such database: check the /db at the end of the URI";
  }
  return {};
}

// An inner error's message without its own "dlock: ", to follow ours.
std::string_view cause(const std::exception& error) {
  std::string_view text = error.what();
  if (text.substr(0, 7) == "dlock: ") text.remove_prefix(7);
  return text;
}

}  // namespace

void RedisOperator::probe() {
  using namespace detail;
  Topology& topology = this->topology();
  const std::string where = topology.describe();
  bool overUnix = false;  // the node is reached over a Unix socket
  const std::string& prefix = operatorOptions().keyPrefix;
  const std::vector<CommandSample> needed =
      neededCommands(topology, KeyNames(prefix, "probe", topology.sharded()), operatorOptions().waitReplicas > 0);
  const std::string rule = aclRule(needed, prefix);
  std::vector<std::string> refused;
  try {
    // One try, no retries: route() does the topology's discovery (the sentinels' master, the
    // cluster's slot map), and a PING on the node it names checks the connection, AUTH and SELECT.
    const Route route = topology.route(0);
    if (route.node == nullptr) throw ConnectionError("dlock: " + route.missing);
    overUnix = !route.node->connectionOptions().unixSocket.empty();
    const ReplyPtr reply = route.node->pool().run([](Connection& connection) { return connection.command({"PING"}); });
    if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, "PING on " + route.node->address());
    // Every command a lock will send, its scripts' inner ones too: a user refused one of them
    // would pass PING, then fail every lock() with the script's refusal.
    refused = route.node->pool().run([&](Connection& connection) { return refusedCommands(connection, needed); });
  } catch (const ServerUnavailableError&) {
    // LOADING, MASTERDOWN, ...: reachable and authenticated, only not serving yet. Calls wait for it.
    return;
  } catch (const BackendError& error) {
    const std::string fix = fixForRefusal(error.what(), overUnix, rule);
    throw BackendError("dlock: connect to " + where + " failed: " + (fix.empty() ? "" : fix + " (") +
                       std::string(cause(error)) + (fix.empty() ? "" : ")"));
  } catch (const TlsFailureError& error) {
    throw ConnectionError("dlock: connect to " + where + " failed: " + std::string(cause(error)));  // names its fix
  } catch (const ConnectionError& error) {
    throw ConnectionError("dlock: connect to " + where + " failed: " + std::string(cause(error)) + "; check the " +
                          (overUnix ? "socket path" : "host and port") + " in the URI and that the server is up");
  }
  if (!refused.empty()) {
    std::string names;
    for (const std::string& name : refused) names += (names.empty() ? "" : ", ") + name;
    throw BackendError("dlock: connect to " + where + " failed: the ACL user may not run " + names +
                       " (dlock's scripts run them, and would fail with NOPERM): grant it what dlock runs, "
                       "ACL SETUSER <user> " + rule);
  }
}

}  // namespace dlock
