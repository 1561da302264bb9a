#include "ClusterScripts.h"

#include <string>

#include "Sha1.h"

namespace dlock::detail {

const Script& shardedReleaseScript() {
  static const Script script = [] {
    // SPUBLISH before DEL, as in the single-server release: a refused SPUBLISH (ACL, a channel
    // in another slot) must fail before the key is gone, since scripts are not rolled back.
    std::string source = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local notified = redis.call('SPUBLISH', ARGV[2], '1')
  redis.call('DEL', KEYS[1])
  return {1, notified}
end
return {0, 0}
)lua";
    std::string sha = sha1Hex(source);
    return Script{"shardedRelease", std::move(source), std::move(sha)};
  }();
  return script;
}

ReplyPtr runScriptAsking(Connection& connection, const Script& script, const Argv& keys, const Argv& args) {
  const std::string keyCount = std::to_string(keys.size());
  Argv argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVAL");
  argv.push_back(script.source);
  argv.push_back(keyCount);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  connection.append({"ASKING"});
  connection.append(argv);
  ReplyPtr asking = connection.readReply();
  ReplyPtr reply = connection.readReply();
  if (asking->type == REDIS_REPLY_ERROR) return asking;
  return reply;
}

}  // namespace dlock::detail
