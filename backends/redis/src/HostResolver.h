// SPDX-License-Identifier: Apache-2.0
// HostResolver.h — a host name's stream-socket addresses by a deadline (resolveHost).
// getaddrinfo takes no timeout: a DNS server that does not answer holds it for resolv.conf's
// timeout times its attempts (10 s by default), past any connect timeout or wait budget. So a name
// is resolved on a thread of its own and the caller waits only until its deadline; a resolution it
// gave up finishes there and is dropped. A numeric address resolves inline, with no thread.
// A forked child never waits on its parent's resolutions: each call waits on state of its own.
// Thread safety: thread-safe.
#pragma once

#include <netdb.h>

#include <chrono>
#include <memory>
#include <string>

namespace dlock::detail {

using ResolvedAddresses = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

// The addresses of `host`, port `port`. ConnectionError when the name does not resolve, or does
// not by `deadline` (`address` names the server in the message).
ResolvedAddresses resolveHost(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
                              const std::string& address);

}  // namespace dlock::detail
