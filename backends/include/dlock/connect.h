// SPDX-License-Identifier: Apache-2.0
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
// connect() checks the backend before it returns: the sentinels' master or the cluster's slot map,
// a connection, AUTH, SELECT and a PING (a redlock: each node, failing when a quorum cannot be
// reached or any node refuses). A server that refuses (a wrong password, a missing database) →
// BackendError; one that cannot be reached → ConnectionError; each message names the fix.
// lazy_connect=true in the URI, or ConnectOptions::lazy, skips the check: the first call then
// meets whatever is wrong, as the backends' own constructors do.
//
// Query options (dlock::uriOptions(scheme) in <dlock/uri.h> lists each scheme's): for all but
// memory, connect_timeout, command_timeout, pool_wait (durations with a unit: 500ms, 2s, 1m),
// pool_size, prefix, lazy_connect (true or false); redis+sentinel also sentinel_user,
// sentinel_password, wait_replicas, wait_timeout; the rediss schemes also tls_ca_file, tls_ca_dir,
// tls_cert_file + tls_key_file (mutual TLS), tls_server_name, tls_verify=full|none; unix also db;
// redlock (host list) and each member of a redlock list also node_timeout (each
// node's connect/command timeout unless those are given). An option the scheme does not take, or
// any other malformed URI → ConfigError naming the problem (never the password).
#pragma once

#include <memory>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock {

struct ConnectOptions {
  bool lazy = false;  // true: no check in connect(), as lazy_connect=true in the URI
  // false: a failed check does not suggest lazy_connect=true (a caller that offers no such
  // choice, as the dlock command).
  bool suggestLazy = true;
};

[[nodiscard]] std::shared_ptr<IOperator> connect(std::string_view uri, const ConnectOptions& options = {});

}  // namespace dlock
