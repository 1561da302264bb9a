// SPDX-License-Identifier: Apache-2.0
// memory:// — the in-process operator; takes no options.
#include "dlock/memory/MemoryOperator.h"
#include "uri/UriScheme.h"

namespace dlock::detail {

const UriScheme& memoryScheme() {
  static const UriScheme scheme = [] {
    UriScheme memory;
    memory.name = "memory";
    memory.connect = [](const ParsedUri&, NodeTimeout) -> std::shared_ptr<IOperator> {
      return std::make_shared<MemoryOperator>();
    };
    return memory;
  }();
  return scheme;
}

}  // namespace dlock::detail
