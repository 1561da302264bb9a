// SPDX-License-Identifier: Apache-2.0
// unix://[[user]:password@]/path/to/redis.sock[?db=N&opts] — one server on a Unix socket. The
// userinfo goes before the path's leading '/' (unix://:secret@/run/redis.sock); the database is an
// option, as the path is the socket's.
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {
namespace {

constexpr UriOption kDb{"db", UriOptionType::Count, "the database (SELECT on connect)"};

}  // namespace

const UriScheme& unixScheme() {
  static const UriScheme scheme = [] {
    UriScheme socket;
    socket.name = "unix";
    socket.options = withCommonOptions({kDb});
    socket.oneHost = true;
    socket.socketPath = true;
    socket.check = [](const UriParser& parser, ParsedUri& uri) {
      const auto db = uri.options.find(std::string(kDb.name));
      if (db != uri.options.end()) uri.db = parser.database(db->second);
    };
    socket.connect = [](const ParsedUri& uri, NodeTimeout nodeTimeout) {
      return connectRedisNode(uri, Endpoint{}, nodeTimeout);
    };
    return socket;
  }();
  return scheme;
}

}  // namespace dlock::detail
