#include "dlock/connect.h"

#include "dlock/LockError.h"
#include "dlock/uri.h"
#include "uri/UriScheme.h"

namespace dlock {
namespace detail {

const std::vector<const UriScheme*>& uriSchemes() {
  static const std::vector<const UriScheme*> schemes = {
      &redisScheme(),   &redissScheme(),   &sentinelScheme(), &redissSentinelScheme(), &clusterScheme(),
      &redissClusterScheme(), &unixScheme(), &redlockScheme(), &memoryScheme()};
  return schemes;
}

std::shared_ptr<IOperator> connectParsed(const ParsedUri& uri, NodeTimeout nodeTimeout) {
  const UriScheme* scheme = findScheme(uri.scheme);
  if (scheme == nullptr || scheme->connect == nullptr) {
    throw ConfigError("dlock: bad URI '" + uri.redacted + "': the " + uri.scheme +
                      " backend is not available in this build of dlock");
  }
  return scheme->connect(uri, nodeTimeout);
}

}  // namespace detail

std::shared_ptr<IOperator> connect(std::string_view uri) { return detail::connectParsed(parseUri(uri)); }

}  // namespace dlock
