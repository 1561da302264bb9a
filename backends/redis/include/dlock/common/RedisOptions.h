// SPDX-License-Identifier: Apache-2.0
// RedisOptions.h — how dlock reaches a Redis server: the options shared by every Redis backend.
//
//   TlsOptions         TLS to the server: trust, client certificate, the name verified
//   ConnectionOptions  one server: address (TCP or Unix socket), TLS, credentials, database,
//                      timeouts, keep-alive
//   PoolOptions        how many connections, and how long a caller waits for a free one
//
// Plain values. A password is only ever sent in AUTH; it never appears in messages or logs.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace dlock {

// TLS 1.2 or later over OpenSSL. With `verify` (the default) the server's certificate chain must
// lead to a trusted CA and name `serverName` (or the host connected to): a DNS name or an IP
// address. Files are read at each connect; a missing or unreadable one is a ConfigError then.
struct TlsOptions {
  bool enabled = false;
  std::string caFile;    // PEM bundle of the CAs to trust; with caDir empty too, the system's store
  std::string caDir;     // a directory of hashed CA certificates (openssl rehash)
  std::string certFile;  // the client's certificate chain (PEM), for mutual TLS; with keyFile
  std::string keyFile;   // its private key (PEM, not encrypted)
  std::string serverName;  // sent as SNI and verified; empty: the host connected to
  bool verify = true;      // false: no chain and no name check, logged as a warning at each connect
};

struct ConnectionOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // A Unix socket path; when set, host and port are not used (and TLS must be off).
  std::string unixSocket;
  TlsOptions tls;
  // AUTH: `password` alone for requirepass, `user` and `password` for an ACL user.
  std::string user;
  std::string password;
  int db = 0;  // SELECT on connect when non-zero
  std::chrono::milliseconds connectTimeout{std::chrono::seconds(1)};
  // Bounds every reply wait; a command that times out fails with ConnectionError.
  std::chrono::milliseconds commandTimeout{std::chrono::seconds(1)};
  bool keepAlive = true;  // TCP keep-alive, so a dead peer is noticed on idle connections
  // TIME in the handshake, for the scripts' deadlines; off for a Sentinel, which runs none.
  bool serverClock = true;

  // "host:port", or the Unix socket path, for messages.
  [[nodiscard]] std::string address() const {
    return unixSocket.empty() ? host + ":" + std::to_string(port) : unixSocket;
  }
};

struct PoolOptions {
  std::size_t size = 4;  // connections per server, opened on demand
  // How long a caller waits for a free connection before ConnectionError; 0 means forever.
  std::chrono::milliseconds waitTimeout{std::chrono::seconds(1)};
  // After a connection fails, the next connect attempt to that server waits at least this long,
  // doubling per consecutive failure up to `maxReconnectBackoff`.
  std::chrono::milliseconds reconnectBackoff{std::chrono::milliseconds(10)};
  std::chrono::milliseconds maxReconnectBackoff{std::chrono::seconds(1)};
};

// The Redis key of a user key is `<keyPrefix>{<user key>}`; companion keys share the hash tag.
inline constexpr const char* kDefaultKeyPrefix = "dlock:";

// How long a key's fencing counter lives after its last acquisition (the fence_ttl URI option).
// Tokens are floored at the server's clock in microseconds, so a token issued after the counter
// expired still exceeds every earlier one unless the server's clock stepped back by more than
// this; a longer one keeps more counters of keys no longer locked.
inline constexpr std::chrono::milliseconds kDefaultFenceTtl = std::chrono::hours(24);

}  // namespace dlock
