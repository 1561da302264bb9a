// SPDX-License-Identifier: Apache-2.0
// RedisOperatorOptions.h — what RedisOperator needs beyond its topology. Plain values.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace dlock::detail {

struct RedisOperatorOptions {
  std::string keyPrefix;
  // How long one call keeps retrying what the topology calls transient (TRYAGAIN, CLUSTERDOWN...).
  std::chrono::milliseconds retryBudget{1000};
  // After an acquire, WAIT until this many replicas have it (0: do not wait) ...
  std::size_t waitReplicas = 0;
  // ... for at most this long; the connection's reply timeout is `commandTimeout` again after it.
  std::chrono::milliseconds waitTimeout{0};
  std::chrono::milliseconds commandTimeout{1000};
  // How long a fencing counter lives after the last acquisition of its key (kDefaultFenceTtl).
  std::chrono::milliseconds fenceTtl{std::chrono::hours(24)};
};

}  // namespace dlock::detail
