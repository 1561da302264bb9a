// SPDX-License-Identifier: Apache-2.0
// ClusterReplies.h — readers of what a cluster node says about where slots live.
//
//   NodeAddress         host and port of a node
//   SlotRange           slots [first, last] and the master serving them
//   parseClusterSlots   the reply of CLUSTER SLOTS; BackendError when it is not that shape
//   parseRedirect       a MOVED or ASK error reply (or its text, as a refused SSUBSCRIBE keeps
//                       it); nothing for any other reply
//
// A node reports an empty host for "the address you reached me at" and "?" for an unknown one;
// the first becomes the asked node's host, ranges with the second are left without an owner.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

struct NodeAddress {
  std::string host;
  int port = 0;

  [[nodiscard]] std::string address() const { return host + ":" + std::to_string(port); }
  bool operator==(const NodeAddress& other) const { return host == other.host && port == other.port; }
};

struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  NodeAddress master;
};

// `askedHost`: the host the reply came from; `where`: for messages ("CLUSTER SLOTS on h:p").
std::vector<SlotRange> parseClusterSlots(const redisReply& reply, const std::string& askedHost,
                                         const std::string& where);

struct Redirect {
  bool ask = false;  // ASK (this command only) rather than MOVED (the slot's new home)
  std::uint16_t slot = 0;
  NodeAddress target;
};

std::optional<Redirect> parseRedirect(const redisReply& reply, const std::string& replyingHost);
std::optional<Redirect> parseRedirect(std::string_view errorText, const std::string& replyingHost);

}  // namespace dlock::detail
