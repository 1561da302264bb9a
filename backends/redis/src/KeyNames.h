// SPDX-License-Identifier: Apache-2.0
// KeyNames.h — the Redis names of one lock, the same for every topology: `<prefix>{<key>}` holds
// the owner token, `<prefix>{<key>}:fence` the fencing counter, `<prefix>{<key>}:owner` the owner
// record (only when the holder records one), `<prefix>{<key>}:released` is the release channel, and `<prefix>{<key>}:released:<token>` the short-lived record that the
// release of `<token>` ran (see Scripts.h). They share the `{<key>}` hash tag, so one script
// touches one cluster slot.
//
// One exception, on a cluster only: a key starting with '}' would give the empty tag `{}`, for
// which Redis hashes each whole name and the three would land in different slots. Such a key is
// named `<prefix>#{<h>}:lock:<key>` (`:fence:`, `:owner:`, `:released:`), <h> being 16 hex digits of the
// SHA-1 of the key. No plain name can take that form (a plain one has '{' right after the prefix),
// and every name holds the whole key, so two keys never share a name. On one server the plain
// names stay, whatever the key: names on one server never change between releases.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::detail {

// CRC16 of the key's hash tag (or of the whole key when it has none) modulo 16384: Redis
// Cluster's slot of a key.
[[nodiscard]] std::uint16_t hashSlot(std::string_view redisKey) noexcept;
[[nodiscard]] std::uint16_t crc16(std::string_view bytes) noexcept;

class KeyNames {
 public:
  // `sharded`: the names are for a cluster (see above). The prefix must not contain '{' or '}'
  // there; the cluster refuses such a prefix.
  KeyNames(std::string_view prefix, std::string_view key, bool sharded);

  [[nodiscard]] const std::string& lock() const noexcept { return lock_; }
  [[nodiscard]] std::string fence() const { return companion("fence"); }
  [[nodiscard]] std::string channel() const { return companion("released"); }
  [[nodiscard]] std::string owner() const { return companion("owner"); }
  // The default lock's waiter registry (Scripts.h); each listener's wake-ups go to `channel():<listener>`.
  [[nodiscard]] std::string waiters() const { return companion("waiters"); }
  // Tokens are fixed-length hex, so the token ends the name unambiguously.
  [[nodiscard]] std::string releaseRecord(std::string_view token) const {
    return companion(std::string("released:").append(token));
  }
  // The fair lock's waiter queue, its waiter leases and its hand-off channel (FairScripts.h).
  [[nodiscard]] std::string fairQueue() const { return companion("fair:queue"); }
  [[nodiscard]] std::string fairLeases() const { return companion("fair:leases"); }
  [[nodiscard]] std::string grantChannel() const { return companion("fair:granted"); }
  // Where the hand-offs to one process's waiters go: the grant channel and its listener.
  [[nodiscard]] std::string grantChannel(std::string_view listener) const {
    return grantChannel().append(":").append(listener);
  }
  // The read-write lock's keys (ReadWriteScripts.h), named apart from the exclusive lock's.
  [[nodiscard]] std::string rwWriter() const { return companion("rw:writer"); }
  [[nodiscard]] std::string rwReaders() const { return companion("rw:readers"); }
  [[nodiscard]] std::string rwQueue() const { return companion("rw:queue"); }
  [[nodiscard]] std::string rwLeases() const { return companion("rw:leases"); }
  [[nodiscard]] std::string rwFence() const { return companion("rw:fence"); }
  [[nodiscard]] std::string rwRecord(std::string_view token) const {
    return companion(std::string("rw:released:").append(token));
  }
  [[nodiscard]] std::string rwGrantChannel() const { return companion("rw:granted"); }
  // The semaphore's keys and grant channel (SemaphoreScripts.h): `:sem:<part>`.
  [[nodiscard]] std::string semaphore(std::string_view part) const {
    return companion(std::string("sem:").append(part));
  }
  // A condition's keys (ConditionScripts.h): `:cond:<part>:<name as hex>`, the name in hex so
  // that no name (any bytes) can spell another key's name; and the channel a signal tells one
  // process's waiters on.
  [[nodiscard]] std::string condition(std::string_view part, std::string_view name) const;
  [[nodiscard]] std::string signalChannel() const { return companion("cond:signalled"); }
  [[nodiscard]] std::string signalChannel(std::string_view listener) const {
    return signalChannel().append(":").append(listener);
  }
  // An election's leader record and its change channel (ElectionScripts.h).
  [[nodiscard]] std::string leaderRecord() const { return companion("election:leader"); }
  [[nodiscard]] std::string leaderChannel() const { return companion("election:changed"); }
  [[nodiscard]] std::uint16_t slot() const noexcept { return hashSlot(lock_); }

 private:
  [[nodiscard]] std::string companion(std::string_view role) const;

  std::string lock_;
  // Derived names only: `<prefix>#{<h>}:` and the key.
  std::string head_;
  std::string key_;
};

}  // namespace dlock::detail
