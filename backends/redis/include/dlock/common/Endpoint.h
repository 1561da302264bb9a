// SPDX-License-Identifier: Apache-2.0
// Endpoint.h — dlock::Endpoint: one server's host and port, as a URI names it. Plain value.
#pragma once

#include <string>

namespace dlock {

struct Endpoint {
  std::string host;  // a name or an address; an IPv6 one without its URI brackets
  int port = 0;

  // "host:port", for messages.
  [[nodiscard]] std::string address() const { return host + ":" + std::to_string(port); }
};

}  // namespace dlock
