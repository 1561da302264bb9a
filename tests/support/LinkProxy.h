// SPDX-License-Identifier: Apache-2.0
// LinkProxy.h — a fault-injecting TCP proxy for one network link on loopback: every connection
// accepted on port() is forwarded to the target, both ways, byte for byte, and the link can be
// told at any time to
//   pass       forward at once (the start state);
//   delay      hold each chunk for a fixed time, then forward it (order kept, per direction);
//   blackhole  forward nothing and close nothing: bytes wait, as TCP retransmits across a
//              partition; when the link heals (pass or delay) what waited is forwarded;
//   refuse     close new connections at once (a port nothing listens on, seen from the client);
// and to act once:
//   resetAll   close every open connection now with a TCP RST (SO_LINGER 0), both sides.
// Delay and blackhole can also be applied to replication links alone (delayReplication…): a
// connection is one once its client sent REPLCONF, PSYNC or SYNC, as a replica does before
// the stream of writes starts; clients and sentinels sharing the proxy are not touched.
// The fault tests put one in front of every server, replication and cluster-bus port, so a
// nemesis reaches every link without root. The unit-level tricks of the older proxies stay:
// hold the bytes of new connections until release(), and lose the one reply after a request ran.
// One thread does the I/O (epoll); every method may be called from any thread.
// Owner: one test or one fault-test run. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::test {

class LinkProxy {
 public:
  enum class Mode { pass, delay, blackhole, refuse };
  enum class Direction { both, toTarget, fromTarget };

  // Listens on 127.0.0.1:listenPort (0: a free port) and forwards to target.
  LinkProxy(std::string targetHost, int targetPort, int listenPort = 0);
  LinkProxy(const LinkProxy&) = delete;
  LinkProxy& operator=(const LinkProxy&) = delete;
  ~LinkProxy();  // closes every connection and joins the I/O thread

  [[nodiscard]] int port() const;
  [[nodiscard]] std::string address() const;  // "127.0.0.1:<port>"
  [[nodiscard]] std::string uri() const;      // "redis://127.0.0.1:<port>"
  [[nodiscard]] int targetPort() const;
  // Points the proxy at another target port (a restarted server on a new port); open
  // connections are reset.
  void retarget(int targetPort);

  // The link's state; each applies to open and new connections at once.
  void pass();
  void delay(std::chrono::milliseconds latency, Direction direction = Direction::both);
  void blackhole(Direction direction = Direction::both);
  void refuse();  // also resets the open connections
  [[nodiscard]] Mode mode() const;
  // pass() also clears what these set. On a replication link the longer latency of the two
  // applies, and either blackhole holds its bytes.
  void delayReplication(std::chrono::milliseconds latency, Direction direction = Direction::both);
  void blackholeReplication(Direction direction = Direction::both);
  // Only the replication links whose client's first bytes hold `marker`: one replica's, by the
  // `REPLCONF listening-port <port>` it opens with.
  void delayReplicationOf(std::string marker, std::chrono::milliseconds latency);
  void passReplication();
  // Blackholes, both ways, the connections whose client's first bytes hold `marker` at byte
  // `offset` (anywhere when absent). A cluster node's id sits at byte 40 of the first message it
  // sends on a bus link, so one node's outgoing links can be cut at the others' bus proxies.
  // pass() clears it.
  void blackholeClientsSending(std::string marker, std::optional<std::size_t> offset = std::nullopt);
  // Rewrites what targets send to clients: each `from` is replaced by its `to` of the same length
  // where it stands as a whole number (no digit on either side), e.g. a server's proxy port by a
  // client's own proxy port in the addresses Sentinel and Cluster hand out, so that each client
  // can have links of its own. Applies to connections accepted from now on.
  void rewriteReplies(std::vector<std::pair<std::string, std::string>> rewrites);
  // Open connections classified as replication links.
  [[nodiscard]] std::size_t replicationConnections() const;

  // Closes every open connection with an RST; the mode stays.
  void resetAll();
  // Connections open now, and accepted since construction.
  [[nodiscard]] std::size_t openConnections() const;
  [[nodiscard]] std::uint64_t acceptedConnections() const;

  // What connections accepted from now on send is held until release(); nothing is dropped or
  // reordered (the older TcpProxy).
  void holdNewConnections();
  // Waits until a held connection has sent bytes containing `text`; false when `budget` ran out.
  [[nodiscard]] bool waitForHeld(std::string_view text, std::chrono::milliseconds budget);
  // Waits until, with the link blackholed toward the target, bytes containing `text` wait in it
  // (a request sent into the cut); false when `budget` ran out.
  [[nodiscard]] bool waitForBlackholed(std::string_view text, std::chrono::milliseconds budget);
  // Holds, from then on until release(), what a connection sends once one read from its client
  // contains `marker` (that read included): one connection's command waits on the path while the
  // others pass, as a segment retransmitted after a short partition does.
  void holdClientsSending(std::string marker);
  // Waits until no held connection is open (the target closed it, say); false when `budget` ran out.
  [[nodiscard]] bool waitUntilNoneHeld(std::chrono::milliseconds budget);
  // Forwards everything held, and holds nothing more.
  void release();

  // The next request a client sends (the next holding `marker`, when given: a command after a
  // fresh connection's handshake) is forwarded; once the target has answered it (so the command
  // ran), that connection is closed without passing the answer on (the older FaultProxy).
  void loseNextReply(std::string marker = {});
  // True once a reply was lost as asked; false when `budget` passed first.
  [[nodiscard]] bool waitReplyLost(std::chrono::milliseconds budget);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock::test
