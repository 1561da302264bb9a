// SPDX-License-Identifier: Apache-2.0
// Probe.h — connecting at once: dlock::connect() checks the server before it returns (a wrong
// host or password shows there, with the fix), unless the URI says lazy_connect=true or the
// caller's ConnectOptions say lazy.
#pragma once

#include "dlock/IOperator.h"
#include "uri/UriScheme.h"

namespace dlock::detail {

// The lazy_connect option, common to every scheme that reaches Redis servers.
inline constexpr UriOption kLazyConnect{"lazy_connect", UriOptionType::Flag,
                                        "true: check the server at the first call, not in connect()"};

// True when `uri` asks to connect lazily.
[[nodiscard]] bool lazyConnect(const ParsedUri& uri);

// Checks a Redis backend now (RedisOperator::probe); nothing for the others.
void probe(IOperator& backend);

}  // namespace dlock::detail
