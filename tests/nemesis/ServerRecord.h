// SPDX-License-Identifier: Apache-2.0
// ServerRecord.h — the fields ServerObserver.h packs into a server record's message:
// `<node> <lag ns> <server µs> <h|r> | <caller args>`.
#pragma once

#include <cstdint>
#include <string>

#include "History.h"

namespace dlock::nemesis {

struct ServerStamp {
  std::string node;              // host:port of the server
  std::int64_t lagNs = 0;        // how long after its caller (a script's call) the command came
  std::int64_t serverUs = 0;     // the server's own clock at the command
  bool serverTimed = true;       // time_ns from the server's clock (h), else from the reading (r)
  std::string caller;            // the caller's arguments, space-separated
};

// The fields of `op`'s message; a message without them gives its whole text as the node.
[[nodiscard]] ServerStamp serverStamp(const Op& op);

}  // namespace dlock::nemesis
