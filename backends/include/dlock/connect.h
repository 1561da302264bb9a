// connect.h — dlock::connect(uri): an IOperator from a URI, the one place that knows every backend.
//
//   memory://                                   in-process (tests)
//   redis://[user:pass@]host:port[/db][?opts]   one server
//   redis+sentinel://[user:pass@]h1:p1,h2:p2/master[/db][?opts]
//   redis+cluster://[user:pass@]h1:p1,h2:p2[?opts]
//   redlock://<uri>;<uri>;...                   Redlock over independent servers
//
// Query options (redis*): connect_timeout, command_timeout (milliseconds or with ms/s suffix),
// pool_size, pool_wait, prefix. A malformed URI → ConfigError naming the problem (never the
// password). Backends not built into this dlock are refused with ConfigError.
#pragma once

#include <memory>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock {

[[nodiscard]] std::shared_ptr<IOperator> connect(std::string_view uri);

}  // namespace dlock
