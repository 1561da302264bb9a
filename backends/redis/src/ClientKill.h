// SPDX-License-Identifier: Apache-2.0
// ClientKill.h — closing a connection on the server's side, so that no byte sent on it can still
// run there (DESIGN.md, "Cancel that cannot land late").
//
//   ClientIdentity     who a connection is on its server: CLIENT INFO's id and addr, learnt in
//                      the connect handshake (no round trip of its own when there is a handshake)
//   closeOnServer()    CLIENT KILL ID <id> ADDR <addr> over another connection of the same pool
//
// A command whose connection timed out or closed under it may still be on its way: held on the
// path, or queued in the server's socket buffer. Once the server has closed that connection, it
// discards whatever arrives on it, so a cancel sent after the kill cannot be overtaken. The kill
// names both id and addr: a server that restarted since reuses ids, never the pair.
// Owner: the caller. Thread safety: thread-safe (the pool is).
#pragma once

#include <hiredis/hiredis.h>

#include <optional>
#include <string>

namespace dlock::detail {

class ConnectionPool;

struct ClientIdentity {
  long long id = 0;
  std::string addr;  // as the server sees the client: "ip:port", or "path:0" on a Unix socket
};

// The identity in a CLIENT INFO reply ("id=7 addr=127.0.0.1:5000 ..."); nullopt for an error
// reply (a server older than 6.2, an ACL without CLIENT INFO) or a reply without both fields.
[[nodiscard]] std::optional<ClientIdentity> readClientInfo(const redisReply& reply);

// Closes `victim` on its server through a connection borrowed from `pool` (its own server), within
// the call's budget. True once the server answered: `victim` is closed there (or was already).
// False when that could not be done (unreachable, CLIENT KILL refused); logged, never thrown.
bool closeOnServer(ConnectionPool& pool, const ClientIdentity& victim) noexcept;

}  // namespace dlock::detail
