// connect.h — dlock::connect(uri): an IOperator from a URI, the one place that knows every backend.
//
//   memory://                                   in-process (tests)
//   redis://[user:pass@]host:port[/db][?opts]   one server
//   unix://[[user]:pass@]/path/redis.sock[?db=N&opts]   one server on a Unix socket
//   redis+sentinel://[user:pass@]h1:p1,h2:p2/master[/db][?opts]
//   redis+cluster://[user:pass@]h1:p1,h2:p2[?opts]
//   rediss://, rediss+sentinel://, rediss+cluster://   the same over TLS (certificate and host
//                                               name verified; see the tls_* options)
//   redlock://[user:pass@]h1:p1,h2:p2,h3:p3[?opts]   Redlock, one node per host
//   redlock://<uri>;<uri>;...                   Redlock over member URIs of any kind
//
// Query options (dlock::uriOptions(scheme) in <dlock/uri.h> lists each scheme's): for all but
// memory, connect_timeout, command_timeout, pool_wait (milliseconds, or with an ms or s suffix),
// pool_size, prefix; redis+sentinel also sentinel_user, sentinel_password, wait_replicas,
// wait_timeout; the rediss schemes also tls_ca_file, tls_ca_dir, tls_cert_file + tls_key_file
// (mutual TLS), tls_server_name, tls_verify=full|none; unix also db; redlock (host list) and each member of a redlock list also node_timeout (each
// node's connect/command timeout unless those are given). An option the scheme does not take, or
// any other malformed URI → ConfigError naming the problem (never the password).
#pragma once

#include <memory>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock {

[[nodiscard]] std::shared_ptr<IOperator> connect(std::string_view uri);

}  // namespace dlock
