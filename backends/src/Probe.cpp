// SPDX-License-Identifier: Apache-2.0
// What dlock::connect() checks before it returns an operator (see <dlock/connect.h>).
#include "uri/Probe.h"

#include "dlock/redis/RedisOperator.h"

namespace dlock::detail {

bool lazyConnect(const ParsedUri& uri) { return uri.flag(std::string(kLazyConnect.name), false); }

void probe(IOperator& backend) {
  // The memory backend has nothing to reach; a redlock probes its members as it makes them.
  if (auto* redis = dynamic_cast<RedisOperator*>(&backend)) redis->probe();
}

}  // namespace dlock::detail
